(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var W = 1000, LABEL = 175, RIGHT = 95, AXIS = 26, LANE = 74;
  var ROW = {fault: 12, proc: 12, lock: 27, journal: 42, call: 58};
  window.addEventListener("error", function (e) {
    document.body.setAttribute("data-js-error", String(e.message || e));
  });
  var data = JSON.parse(document.getElementById("fiskj-data").textContent);

  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, String(attrs[k])); }
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, cls) {
    var t = el("text", {x: x, y: y}, parent);
    if (cls) t.setAttribute("class", cls);
    t.textContent = s;
    return t;
  }
  var unit = "ns";
  function fmt(ns) {
    if (unit === "event") return "n=" + Math.round(ns);
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e10 ? 1 : 2) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e7 ? 1 : 2) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + " \u00b5s";
    return Math.round(ns) + " ns";
  }
  function ticks(lo, hi, n) {
    var span = hi - lo;
    if (!(span > 0)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log(span / n) / Math.LN10));
    var err = span / n / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    if (unit === "event") step = Math.max(1, Math.round(step));
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9 && out.length < 50; t += step) out.push(t);
    return out;
  }
  function rowOf(k) {
    if (k === "fault") return ROW.fault;
    if (k === "lock") return ROW.lock;
    if (k === "model" || k === "effect") return ROW.call;
    return ROW.journal;
  }
  function shape(g, ev, x) {
    var y = rowOf(ev.k), s;
    if (ev.k === "model") s = el("circle", {cx: x, cy: y, r: 4.5}, g);
    else if (ev.k === "effect") s = el("path", {d: "M" + (x - 5) + "," + (y + 5) + " l5,-10 l5,10 z"}, g);
    else if (ev.k === "fault") s = el("path", {d: "M" + x + "," + (y - 7) + " l7,7 l-7,7 l-7,-7 z"}, g);
    else if (ev.k === "error") s = el("path", {d: "M" + (x - 4) + "," + (y - 4) + " l8,8 M" + (x + 4) + "," + (y - 4) + " l-8,8"}, g);
    else if (ev.k === "fsync") s = el("rect", {x: x - 1, y: y - 8, width: 2, height: 16}, g);
    else if (ev.k === "jop") s = el("rect", {x: x - 2, y: y - 6, width: 4, height: 12}, g);
    else if (ev.k === "lock") s = el("rect", {x: x - 1, y: y - 6, width: 2, height: 12}, g);
    else s = el("rect", {x: x - 1.5, y: y - 6, width: ev.k === "write" ? 3 : 2, height: 12}, g);
    return s;
  }

  function Timeline(box, tl, side) {
    this.box = box; this.tl = tl; this.side = side; this.focus = null;
    this.full = tl.unit === "event" ? [0, tl.end + 1] : [0, Math.max(1, tl.end) * 1.02];
  }
  Timeline.prototype.draw = function (dom) {
    var self = this, tl = this.tl, box = this.box;
    while (box.firstChild) box.removeChild(box.firstChild);
    var lo = dom[0], hi = dom[1], x0 = LABEL, x1 = W - RIGHT;
    unit = tl.unit || "ns";
    var H = AXIS + tl.lanes.length * LANE + 4;
    var svg = el("svg", {viewBox: "0 0 " + W + " " + H, "class": "tl-svg", role: "img"}, box);
    function X(t) { return x0 + (t - lo) / (hi - lo) * (x1 - x0); }
    function inView(t) { return t !== null && t >= lo && t <= hi; }
    var axis = el("g", {"class": "axis"}, svg);
    ticks(lo, hi, 8).forEach(function (t) {
      var x = X(t);
      el("line", {x1: x, x2: x, y1: AXIS - 6, y2: H}, axis);
      text(axis, x + 2, AXIS - 10, fmt(t));
    });
    text(axis, 4, AXIS - 10, unit === "event" ? "traced call number (n)" : "time since the first leg's start");
    var n = {lanes: 0, events: 0, marked: 0, spans: 0, lanesMarked: 0};
    tl.lanes.forEach(function (lane, i) {
      var g = el("g", {"class": "lane" + (lane.m.length ? " marked" : ""), "data-leg": lane.leg === null ? "none" : lane.leg,
                       "data-m": lane.m.join(" "), transform: "translate(0," + (AXIS + i * LANE) + ")"}, svg);
      el("rect", {x: 0, y: 0, width: W, height: LANE - 4, "class": "lane-bg"}, g);
      var label = el("g", {"class": "lanelabel"}, g);
      text(label, 6, 15, lane.leg === null ? lane.kind : "leg " + lane.leg + " " + lane.kind);
      if (lane.pid) text(label, 6, 29, "pid " + lane.pid, "note");
      if (lane.fault) text(label, 6, 43, lane.fault.length > 26 ? lane.fault.slice(0, 25) + "\u2026" : lane.fault, "bad");
      if (lane.capped) text(label, 6, 57, lane.events.length + " of " + lane.total + " events", "warn");
      else if (lane.estimated) text(label, 6, 57, "some times estimated", "warn");
      el("title", {}, label).textContent = (lane.argv || lane.kind) + (lane.fault ? "\nfault: " + lane.fault : "");
      if (lane.start !== null && lane.end !== null) {
        label.addEventListener("click", function () {
          var pad = Math.max(1, (lane.end - lane.start) * 0.03);
          self.draw([lane.start - pad, lane.end + pad]);
        });
      }
      if (lane.start !== null && lane.end !== null && lane.end >= lo && lane.start <= hi) {
        var a = X(Math.max(lo, lane.start)), b = X(Math.min(hi, lane.end));
        var bar = el("rect", {x: a, y: ROW.proc - 6, width: Math.max(1, b - a), height: 12, "class": "proc"}, g);
        el("title", {}, bar).textContent = "leg " + lane.leg + " " + lane.kind + ": " + fmt(lane.start) + " to " + fmt(lane.end) + ", " + lane.exit;
        n.spans++;
        if (inView(lane.end)) text(g, X(lane.end) + 4, ROW.proc + 4, lane.exit, "exit " + lane.exit_class);
      }
      lane.locks.forEach(function (s) {
        var st = s[0] === null ? lo : s[0], en = s[1] === null ? hi : s[1];
        if (en < lo || st > hi) return;
        var a = X(Math.max(lo, st)), b = X(Math.min(hi, en));
        var r = el("rect", {x: a, y: ROW.lock - 4, width: Math.max(1, b - a), height: 8, "class": "lockspan"}, g);
        el("title", {}, r).textContent = "run lock held by pid " + s[2] + ": " + fmt(st) + " to " + fmt(en);
        n.spans++;
      });
      lane.events.forEach(function (ev) {
        if (!inView(ev.t)) return;
        var x = X(ev.t);
        if (ev.m.length) el("line", {x1: x, x2: x, y1: 2, y2: LANE - 6, "class": "markline"}, g);
        var s = shape(g, ev, x);
        s.setAttribute("class", "ev k-" + ev.k + (ev.m.length ? " marked" : ""));
        s.setAttribute("data-key", ev.key);
        s.setAttribute("data-m", ev.m.join(" "));
        el("title", {}, s).textContent = fmt(ev.t) + (ev.est ? " (estimated)" : "") + ": " + ev.label;
        s.addEventListener("click", function () {
          unit = tl.unit || "ns";
          self.side.querySelector(".ev-detail").textContent =
            "leg " + (lane.leg === null ? "-" : lane.leg) + ", " + fmt(ev.t) + ": " + ev.label + "\n" + JSON.stringify(ev.d, null, 1);
        });
        n.events++;
        if (ev.m.length) n.marked++;
      });
      n.lanes++;
      if (lane.m.length) n.lanesMarked++;
    });
    this.brush(svg, X, lo, hi, H);
    box.setAttribute("data-lanes", n.lanes);
    box.setAttribute("data-events", n.events);
    box.setAttribute("data-marked", n.marked);
    box.setAttribute("data-lanes-marked", n.lanesMarked);
    box.setAttribute("data-spans", n.spans);
    box.setAttribute("data-domain", Math.round(lo) + " " + Math.round(hi));
    this.applyFocus();
  };
  Timeline.prototype.brush = function (svg, X, lo, hi, H) {
    var self = this, start = null, rect = null;
    function at(e) {
      var m = svg.getScreenCTM();
      if (!m) return null;
      var p = svg.createSVGPoint(); p.x = e.clientX; p.y = e.clientY;
      return p.matrixTransform(m.inverse()).x;
    }
    function back(x) { return lo + (x - LABEL) / (W - RIGHT - LABEL) * (hi - lo); }
    svg.addEventListener("mousedown", function (e) {
      var x = at(e);
      if (x === null || x < LABEL) return;
      start = x;
      rect = el("rect", {x: x, y: AXIS - 4, width: 0, height: H - AXIS, "class": "brush"}, svg);
      e.preventDefault();
    });
    svg.addEventListener("mousemove", function (e) {
      if (start === null) return;
      var x = at(e);
      rect.setAttribute("x", Math.min(start, x));
      rect.setAttribute("width", Math.abs(x - start));
    });
    svg.addEventListener("mouseup", function (e) {
      if (start === null) return;
      var x = at(e), a = Math.min(start, x), b = Math.max(start, x);
      start = null;
      if (b - a > 4) self.draw([back(a), back(b)]); else if (rect) { rect.remove(); rect = null; }
    });
    svg.addEventListener("dblclick", function () { self.draw(self.full); });
  };
  Timeline.prototype.applyFocus = function () {
    var box = this.box, id = this.focus;
    box.classList.toggle("focus", id !== null);
    Array.prototype.forEach.call(box.querySelectorAll(".hl"), function (e) { e.classList.remove("hl"); });
    if (id === null) return;
    Array.prototype.forEach.call(box.querySelectorAll('[data-m~="' + id + '"]'), function (e) { e.classList.add("hl"); });
  };

  var drawn = 0;
  data.timelines.forEach(function (tl, i) {
    var box = document.querySelector('.tl[data-index="' + i + '"]');
    if (!box) return;
    var section = box.closest("section.trial"), side = section.querySelector(".side");
    var t = new Timeline(box, tl, side);
    t.draw(t.full);
    section.querySelector("button.reset").addEventListener("click", function () { t.draw(t.full); });
    Array.prototype.forEach.call(side.querySelectorAll("button.viol"), function (b) {
      b.addEventListener("click", function () {
        var id = b.getAttribute("data-v");
        t.focus = t.focus === id ? null : id;
        Array.prototype.forEach.call(side.querySelectorAll("button.viol"), function (o) {
          o.classList.toggle("on", o.getAttribute("data-v") === t.focus);
        });
        t.applyFocus();
      });
    });
    drawn++;
  });
  document.body.setAttribute("data-timelines-drawn", String(drawn));
})();
