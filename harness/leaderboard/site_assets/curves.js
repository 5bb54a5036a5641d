/* harness site: a trained row's training curves, drawn as SVG. */
(function (site) {
"use strict";

var fetchJSON = site.fetchJSON, el = site.el, setCrumbs = site.setCrumbs, show = site.show;

var SVG = "http://www.w3.org/2000/svg";

function svgNode(tag, attributes) {
  var node = document.createElementNS(SVG, tag);
  Object.keys(attributes).forEach(function (name) { node.setAttribute(name, attributes[name]); });
  return node;
}

/* One chart per series (a loss term or the dev score), each seed's fit a line: seeds differ by dash pattern and
   are named in the legend, so colour is never the only cue. */
function curveChart(name, lines) {
  var width = 560, height = 200, left = 56, right = 12, top = 12, bottom = 30;
  var steps = [], values = [];
  lines.forEach(function (line) { steps = steps.concat(line.step); values = values.concat(line.value); });
  var x0 = Math.min.apply(null, steps), x1 = Math.max.apply(null, steps);
  var y0 = Math.min.apply(null, values), y1 = Math.max.apply(null, values);
  var oneStep = x1 === x0;
  if (oneStep) { x1 = x0 + 1; }
  if (y1 === y0) { y1 = y0 + 1; }
  function x(step) { return left + (step - x0) / (x1 - x0) * (width - left - right); }
  function y(value) { return top + (1 - (value - y0) / (y1 - y0)) * (height - top - bottom); }
  var svg = svgNode("svg", { viewBox: "0 0 " + width + " " + height, width: width, height: height, role: "img",
    "aria-label": name + ": " + lines.length + " line(s), steps " + x0 + "-" + x1 });
  svg.appendChild(svgNode("rect", { x: left, y: top, width: width - left - right, height: height - top - bottom,
    fill: "none", stroke: "#999" }));
  [[y1, top + 4], [y0, height - bottom]].forEach(function (tick) {
    var label = svgNode("text", { x: left - 4, y: tick[1], "text-anchor": "end", "font-size": "11" });
    label.textContent = Number(tick[0]).toPrecision(4);
    svg.appendChild(label);
  });
  (oneStep ? [[x0, left]] : [[x0, left], [x1, width - right]]).forEach(function (tick, index) {
    var label = svgNode("text", { x: tick[1], y: height - 10, "text-anchor": index ? "end" : "start", "font-size": "11" });
    label.textContent = "step " + tick[0];
    svg.appendChild(label);
  });
  var dashes = ["", "6 3", "2 3", "8 3 2 3"];
  var colours = ["#1f4e9c", "#b35900", "#2a7a2a", "#7a2a7a"];
  lines.forEach(function (line, index) {
    var points = line.step.map(function (step, i) { return x(step).toFixed(1) + "," + y(line.value[i]).toFixed(1); });
    svg.appendChild(svgNode("polyline", { points: points.join(" "), fill: "none", stroke: colours[index % 4],
      "stroke-width": "1.5", "stroke-dasharray": dashes[index % 4] }));
    if (line.step.length <= 50) {  // a dev score kept once per epoch is a few points: mark each (squares for odd lines)
      line.step.forEach(function (step, i) {
        svg.appendChild(index % 2 ? svgNode("rect", { x: x(step) - 3, y: y(line.value[i]) - 3, width: 6, height: 6,
          fill: colours[index % 4] }) : svgNode("circle", { cx: x(step), cy: y(line.value[i]), r: 3, fill: colours[index % 4] }));
      });
    }
  });
  var legend = el("p", { class: "note" }, lines.map(function (line, index) {
    return el("span", { text: (index ? "; " : "") + line.label + " (" + ["solid", "dashed", "dotted", "dash-dot"][index % 4] +
      (line.step.length <= 50 ? (index % 2 ? ", squares" : ", circles") : "") + ", " + line.step.length + " points)" });
  }));
  return el("figure", {}, [el("figcaption", { text: name }), svg, legend]);
}

function viewCurves(id, rowIndex) {
  return fetchJSON("data/tables/" + id + ".json").then(function (table) {
    var row = table.rows[rowIndex];
    setCrumbs([{ text: "index", href: "#/" }, { text: table.family, href: "#/table/" + id }, { text: "training curves" }]);
    if (!row || !row["training-curves"]) {
      show([el("h1", { text: "Training curves" }), el("p", { text: "This row's checkpoints keep no training curves." })], "curves");
      return;
    }
    return fetchJSON(row["training-curves"]).then(function (fits) {
      var bySeries = {};
      fits.forEach(function (fit) {
        Object.keys(fit.series).forEach(function (name) {
          (bySeries[name] = bySeries[name] || []).push({ label: "seed " + fit.seed + (fit.fit > 1 ? " fit " + fit.fit : ""),
            step: fit.series[name].step, value: fit.series[name].value });
        });
      });
      var nodes = [el("h1", { text: "Training curves: " + row.label }),
        el("p", { class: "note", text: "Per-step values as each checkpoint's training.json keeps them (beyond 1,024 points a " +
          "series is averaged pairwise; harness plot training draws the same data)." })];
      Object.keys(bySeries).sort().forEach(function (name) { nodes.push(curveChart(name, bySeries[name])); });
      show(nodes, "training curves");
    });
  });
}

site.viewCurves = viewCurves;
}(window.harnessSite));
