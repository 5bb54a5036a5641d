/* harness site: the one script. Views by the URL's hash:
 *   #/                                  index of families and their tables
 *   #/table/<id>                        a table with filters, sorting and the choice of two rows
 *   #/compare/<id>/<a>/<b>              the per-task paired comparison of rows a and b (as `harness compare`)
 *   #/examples/<id>/<a>/<b>/<column>    the examples behind that difference on one task
 * Every number is computed by harness when the site is built (data/*.json); this script only shows, filters,
 * sorts and, for the examples view, orders the stored per-example scores. */
"use strict";

var main = document.getElementById("main");
var crumbs = document.getElementById("crumbs");
var cache = {};

function fetchJSON(path) {
  if (!cache[path]) {
    cache[path] = fetch(path).then(function (response) {
      if (!response.ok) { throw new Error(path + ": " + response.status + " " + response.statusText); }
      return response.json();
    });
  }
  return cache[path];
}

function el(tag, attributes, children) {
  var node = document.createElement(tag);
  Object.keys(attributes || {}).forEach(function (name) {
    var value = attributes[name];
    if (value === null || value === undefined || value === false) { return; }
    if (name === "text") { node.textContent = value; }
    else if (name.slice(0, 2) === "on") { node.addEventListener(name.slice(2), value); }
    else { node.setAttribute(name, value === true ? "" : value); }
  });
  (children || []).forEach(function (child) {
    if (child === null || child === undefined) { return; }
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}

function fixed(value, digits) {
  return value === null || value === undefined ? "" : Number(value).toFixed(digits);
}

function signed(value, digits) {
  if (value === null || value === undefined) { return ""; }
  return (value >= 0 ? "+" : "") + Number(value).toFixed(digits);
}

function setCrumbs(parts) {
  crumbs.textContent = "";
  parts.forEach(function (part, index) {
    if (index) { crumbs.appendChild(document.createTextNode(" › ")); }
    crumbs.appendChild(part.href ? el("a", { href: part.href, text: part.text }) : el("span", { text: part.text }));
  });
}

function show(nodes, title) {
  main.textContent = "";
  nodes.forEach(function (node) { if (node) { main.appendChild(node); } });
  document.title = title + " · harness results";
  main.focus();
}

function failure(error) {
  show([el("h1", { text: "Could not load this view" }), el("p", { class: "reason", text: String(error) })], "error");
}

/* ---------------------------------------------------------------- index */
function firstSentence(text) {  // a matrix's description in the index; the whole of it heads its page
  var end = text.search(/(?<!\bal|\be\.g|\bi\.e)[.;] (?=[A-Z(])/);  // not at "et al. " nor before a list
  return end < 0 || end > 220 ? (text.length > 220 ? text.slice(0, 220) + "…" : text) : text.slice(0, end + 1);
}

function viewIndex() {
  setCrumbs([{ text: "index" }]);
  return fetchJSON("data/index.json").then(function (index) {
    var nodes = [el("h1", { text: "Results: every family table" }),
      el("p", { class: "note", text: "From the store " + index.store + ". Open a table to filter and sort it, " +
        "choose two rows to compare them task by task, and look at the examples behind a difference." })];
    if (index.invalid_records) {
      nodes.push(el("p", { class: "failed", text: index.invalid_records + " invalid record(s): shown as `invalid`, " +
        "never ranked (harness leaderboard lists them)." }));
    }
    var rows = [];
    index.families.forEach(function (family) {
      family.tables.forEach(function (table) {
        rows.push(el("tr", {}, [
          el("td", { class: "text" }, [el("a", { href: "#/table/" + table.id, text: family.family })]),
          el("td", { class: "text", text: table.title || "(one section)" }),
          el("td", { class: "num", text: String(table.rows) }),
          el("td", { class: "text", text: table.profiles.join(", ") }),
          el("td", { class: "text", text: table.backbones.join(", ") }),
          el("td", { class: "text", text: table.seeds.join(", ") }),
          el("td", { class: "text", text: table.dates.length ? table.dates[0] + " – " + table.dates[1] : "" }),
          el("td", { class: "text", text: table.columns.join(", ") })
        ]));
      });
    });
    nodes.push(el("div", { class: "scroll" }, [el("table", { id: "index-table" }, [
      el("thead", {}, [el("tr", {}, ["family", "section", "rows", "profiles", "backbones", "seeds", "dates",
        "tasks"].map(function (name) { return el("th", { class: "text", scope: "col", text: name }); }))]),
      el("tbody", {}, rows)
    ])]));
    if (index.matrices && index.matrices.length) {
      nodes.push(el("h2", { text: "Paper tables (matrices)" }));
      nodes.push(el("div", { class: "scroll" }, [el("table", { id: "matrix-table" }, [
        el("thead", {}, [el("tr", {}, ["paper table", "what", "rows", "profile", "backbones", "seeds", "dates", "columns"]
          .map(function (name) { return el("th", { class: "text", scope: "col", text: name }); }))]),
        el("tbody", {}, index.matrices.map(function (matrix) {
          return el("tr", {}, [el("td", { class: "text" }, [el("a", { href: "#/table/" + matrix.id, text: matrix.name }),
              " ", el("a", { class: "count", href: matrix.page, text: "(page)", title: "the page harness leaderboard --matrix writes" })]),
            el("td", { class: "text sentence", title: matrix.description, text: firstSentence(matrix.description) }),
            el("td", { class: "num", text: String(matrix.rows) }), el("td", { class: "text", text: matrix.profiles.join(", ") }),
            el("td", { class: "text", text: matrix.backbones.join(", ") }), el("td", { class: "text", text: matrix.seeds.join(", ") }),
            el("td", { class: "text", text: matrix.dates.length ? matrix.dates[0] + " – " + matrix.dates[1] : "" }),
            el("td", { class: "text sentence", text: matrix.columns.join(", ") })]);
        }))])]));
      nodes.push(el("p", { class: "note", text: "A paper table is a matrix file's entries as rows: filter, sort, compare " +
        "and examples as in a family table, with our numbers beside the paper's and the verdicts of the reproduction " +
        "page; (page) is the page `harness leaderboard --matrix` writes." }));
    }
    show(nodes, "index");
  });
}

/* ---------------------------------------------------------------- table */
var tableState = {};  // per table id: filters, sort, chosen rows, cost columns (kept while the page is open)

function stateOf(id) {
  if (!tableState[id]) {
    tableState[id] = { profile: "", backbone: "", train: "", complete: "", seen: "", text: "", sortColumn: null,
                       ascending: false, a: null, b: null, cost: false };
  }
  return tableState[id];
}

function distinct(values) {
  return values.filter(function (value, index) { return values.indexOf(value) === index; }).sort();
}

function filterSelect(label, name, options, state, redraw) {
  var select = el("select", { name: name, id: "filter-" + name, onchange: function () {
    state[name] = select.value; redraw();
  } }, options.map(function (option) {
    return el("option", { value: option[0], text: option[1], selected: state[name] === option[0] });
  }));
  return el("label", { for: "filter-" + name }, [label, select]);
}

function rowPasses(row, state) {
  if (state.profile && row.profile !== state.profile) { return false; }
  if (state.backbone && row.backbone !== state.backbone) { return false; }
  if (state.train === "(untrained)" && row.train_on) { return false; }
  if (state.train && state.train !== "(untrained)" && row.train_on !== state.train) { return false; }
  if (state.complete === "complete" && !row.complete) { return false; }
  if (state.complete === "incomplete" && row.complete) { return false; }
  if (state.seen === "clean" && row.contaminated) { return false; }
  if (state.seen === "seen" && !row.contaminated) { return false; }
  if (state.text && (row.label + " " + row.spec).toLowerCase().indexOf(state.text.toLowerCase()) < 0) { return false; }
  return true;
}

function sortKey(row, column) {
  if (column === "rank") { return row.rank; }
  if (column === "model") { return row.label.toLowerCase(); }
  if (column === "average") { return row.average; }
  if (typeof column === "number") { return row.cells[column].sort; }
  if (column.slice(0, 6) === "extra:") { return extraSort(column, row); }
  if (column.slice(0, 5) === "cost:") {
    var value = row.cost[Number(column.slice(5))];
    var number = parseFloat(value);
    return value === "" ? null : isNaN(number) ? value.toLowerCase() : number;
  }
  return null;
}

var extraColumns = [];  // the shown table's extra columns (a paper table's averages and paper numbers)

function extraSort(column, row) {
  var value = extraColumns[Number(column.slice(6))].sort[row.index];
  return value === undefined ? null : value;
}

function sortedRows(rows, state) {
  if (state.sortColumn === null) { return rows.slice(); }
  return rows.slice().sort(function (x, y) {
    var a = sortKey(x, state.sortColumn), b = sortKey(y, state.sortColumn);
    if (a === null && b === null) { return x.index - y.index; }
    if (a === null) { return 1; }  // empty cells last, either way
    if (b === null) { return -1; }
    var order = a < b ? -1 : a > b ? 1 : 0;
    return (state.ascending ? order : -order) || x.index - y.index;
  });
}

function sortHeader(text, column, state, redraw, extra) {
  var active = state.sortColumn === column;
  return el("th", { scope: "col", class: extra || "", "aria-sort": active ? (state.ascending ? "ascending" : "descending") : null },
    [el("button", { class: "sort", type: "button", "data-column": String(column), title: "sort by " + text,
      onclick: function () {
        if (state.sortColumn === column) { state.ascending = !state.ascending; }
        else { state.sortColumn = column; state.ascending = column === "rank" || column === "model"; }
        redraw();
      } }, [text])]);
}

function valueNode(text) {  // "mean ± std [low, high] marks": the interval on a line of its own keeps columns narrow
  var split = text.indexOf(" [");
  if (split < 0) { return el("span", { text: text }); }
  return el("span", {}, [text.slice(0, split), el("span", { class: "interval", text: text.slice(split + 1) })]);
}

function cellNode(cell) {
  var classes = "num" + (cell.mark === "best-significant" ? " best" : "");
  var title = cell.mark === "best-significant" ? "best, significantly better than the runner-up" :
    cell.mark === "tied" ? "not distinguishable from the best" : null;
  var inner = cell.kind === "value" ? valueNode(cell.text) :
    el("span", { class: cell.kind === "failed" || cell.kind === "invalid" ? "failed" : "status", text: cell.text });
  return el("td", { class: classes, title: title }, [inner]);
}

/* Training curves (per-step training reports) are not in this store's records yet: when a row carries them under
 * "training-curves" (a list of {step, loss}), this is where the table links them. */
function trainingCurvesNode(row, tableId) {
  if (!row["training-curves"]) { return null; }
  return el("a", { href: "#/curves/" + tableId + "/" + row.index, class: "count",
    text: " curves", title: "per-step training losses and dev scores of this row's seeds" });
}

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

function viewTable(id) {
  return fetchJSON("data/tables/" + id + ".json").then(function (table) {
    setCrumbs([{ text: "index", href: "#/" }, { text: table.family + (table.title ? ": " + table.title : "") }]);
    var state = stateOf(id);
    var holder = el("div", {});
    function redraw() {
      var focused = document.activeElement && document.activeElement.getAttribute("data-column");
      var focusedId = document.activeElement && document.activeElement.id;
      holder.textContent = "";
      holder.appendChild(tableBody(table, state, redraw));
      if (focused !== null && focused !== undefined) {
        var button = holder.querySelector('button.sort[data-column="' + focused + '"]');
        if (button) { button.focus(); }
      } else if (focusedId) {
        var again = document.getElementById(focusedId);
        if (again) { again.focus(); }
      }
    }
    var rows = table.rows;
    var filters = el("div", { class: "filters", role: "group", "aria-label": "filters" }, [
      filterSelect("profile", "profile", [["", "any"]].concat(distinct(rows.map(function (r) { return r.profile; }))
        .map(function (v) { return [v, v]; })), state, redraw),
      filterSelect("backbone", "backbone", [["", "any"]].concat(distinct(rows.map(function (r) { return r.backbone; }))
        .map(function (v) { return [v, v]; })), state, redraw),
      filterSelect("training source", "train", [["", "any"], ["(untrained)", "untrained"]].concat(
        distinct(rows.map(function (r) { return r.train_on; }).filter(Boolean)).map(function (v) { return [v, v]; })),
        state, redraw),
      filterSelect("seeds", "complete", [["", "any"], ["complete", "every cell has every seed"],
        ["incomplete", "some cell lacks a seed (*)"]], state, redraw),
      filterSelect("contamination", "seen", [["", "any"], ["clean", "no test text seen in training"],
        ["seen", "saw test texts (†/‡)"]], state, redraw),
      el("label", { for: "filter-text" }, ["model contains", el("input", { id: "filter-text", type: "search",
        value: state.text, oninput: function (event) { state.text = event.target.value; redraw(); } })])
    ]);
    if (table.has_cost) {
      filters.appendChild(el("label", { for: "filter-cost" }, ["cost columns", el("input", { id: "filter-cost",
        type: "checkbox", checked: state.cost, onchange: function (event) { state.cost = event.target.checked; redraw(); } })]));
    }
    var matrix = table.kind === "matrix";
    var nodes = [el("h1", { text: (matrix ? "Paper table " : "Family ") + table.family }),
      matrix ? el("p", { class: "note sentence", text: "What it reproduces: " + table.description }) :
        table.title ? el("p", { class: "note", text: table.title }) : null];
    (table.header_lines || []).forEach(function (line) { nodes.push(el("p", { class: "note", text: line })); });
    if (matrix) {
      nodes.push(el("p", { class: "note" }, ["Rows are the matrix's entries in its order (rank: by the average over " +
        "its task columns); the (paper) and Δ columns are the paper's numbers and ours minus them. ",
        el("a", { href: table.page, text: "The page harness leaderboard --matrix writes" }), "."]));
    }
    if (table.cost_view && table.cost_view.length) {
      nodes.push(el("p", { class: "note" }, [el("a", { href: "#cost-view", id: "cost-link", onclick: function (event) {
        event.preventDefault(); var target = document.getElementById("cost-view"); if (target) { target.scrollIntoView(); target.focus(); }
      }, text: "Quality against cost" }), " (below the table): this table's rows by their measured cost, with the Pareto front."]));
    }
    nodes = nodes.concat([
      el("p", { class: "note", text: "Cells: main score x100, mean ± std over seeds, [95% interval]; bold: best " +
        "and significantly better than the runner-up; ≈ tied with the best; * not every seed; - not run. Choose row " +
        "A and row B (radio buttons), then Compare." }),
      filters, holder]);
    table.notes.forEach(function (line) { nodes.push(el("p", { class: "note", text: line.replace(/\*\*bold\*\*/g, "bold") })); });
    (table.cost_view || []).forEach(function (panel) {  // quality against cost, as `harness plot cost` draws it
      if (!nodes.some(function (node) { return node && node.id === "cost-view"; })) {
        nodes.push(el("h2", { id: "cost-view", tabindex: "-1", text: "Quality against cost (harness plot cost's panels)" }));
      }
      nodes.push(el("div", { class: "scroll" }, [el("table", { class: "cost-view" }, [
        el("caption", { class: "note", text: panel.panel + ": " + panel.axis + "; front = no other row is at least as good and at most as costly" }),
        el("thead", {}, [el("tr", {}, ["model", panel.panel, table.average_header, "Pareto front"].map(function (h) {
          return el("th", { scope: "col", class: "text", text: h }); }))]),
        el("tbody", {}, panel.points.map(function (point) {
          return el("tr", { class: point.front ? "chosen" : null }, [el("td", { class: "text model", text: table.rows[point.row].label }),
            el("td", { class: "num", text: String(point.cost) }), el("td", { class: "num", text: fixed(point.quality, 2) }),
            el("td", { class: "text" + (point.front ? " best" : ""), text: point.front ? "on the front" : "-" })]);
        }))])]));
    });
    if (table.agreement) {
      nodes.push(el("h2", { id: "agreement", text: table.agreement.title }));
      nodes.push(el("p", { class: "note", text: table.agreement.legend }));
      nodes.push(el("div", { class: "scroll" }, [el("table", { class: "legend", id: "agreement-table" }, [
        el("thead", {}, [el("tr", {}, table.agreement.headers.map(function (h) { return el("th", { scope: "col", class: "text", text: h }); }))]),
        el("tbody", {}, table.agreement.lines.map(function (line) {
          return el("tr", {}, line.map(function (value) { return el("td", { class: "text sentence", text: value }); }));
        }))])]));
    }
    if (table.legend.length) {
      nodes.push(el("h2", { text: "Legend: short labels" }));
      nodes.push(el("div", { class: "scroll" }, [el("table", { class: "legend" }, [
        el("thead", {}, [el("tr", {}, [el("th", { class: "text", text: "label" }), el("th", { class: "text", text: "full spec" })])]),
        el("tbody", {}, table.legend.map(function (entry) {
          return el("tr", {}, [el("td", { class: "text", text: entry[0] }), el("td", { class: "text sentence", text: entry[1] })]);
        }))])]));
    }
    show(nodes, table.family);
    redraw();
  });
}

function tableBody(table, state, redraw) {
  var visible = sortedRows(table.rows.filter(function (row) { return rowPasses(row, state); }), state);
  var heads = [el("th", { scope: "col", class: "text", text: "A" }), el("th", { scope: "col", class: "text", text: "B" }),
    sortHeader("rank", "rank", state, redraw, "text"), sortHeader("model", "model", state, redraw, "text"),
    el("th", { scope: "col", class: "text", text: "train on" }), el("th", { scope: "col", class: "text", text: "seeds" })];
  extraColumns = table.extra_columns || [];
  function extrasAfter(index) {
    return extraColumns.map(function (extra, k) { return [extra, k]; }).filter(function (pair) { return pair[0].after === index; });
  }
  table.columns.forEach(function (column, index) {
    heads.push(sortHeader(column, index, state, redraw));
    extrasAfter(index).forEach(function (pair) {
      heads.push(sortHeader(pair[0].header, "extra:" + pair[1], state, redraw, pair[0].paper ? "paper" : ""));
    });
  });
  heads.push(sortHeader(table.average_header, "average", state, redraw));
  if (state.cost) {
    table.cost_header.forEach(function (name, index) { heads.push(sortHeader(name, "cost:" + index, state, redraw)); });
  }
  var body = visible.map(function (row) {
    var chosen = state.a === row.index || state.b === row.index;
    var cells = [
      el("td", {}, [el("input", { type: "radio", name: "row-a", id: "a-" + row.index, "aria-label": "row A: " + row.label,
        checked: state.a === row.index, onchange: function () { state.a = row.index; redraw(); } })]),
      el("td", {}, [el("input", { type: "radio", name: "row-b", id: "b-" + row.index, "aria-label": "row B: " + row.label,
        checked: state.b === row.index, onchange: function () { state.b = row.index; redraw(); } })]),
      el("td", { class: "text num", text: row.rank === null ? "" : String(row.rank) }),
      el("td", { class: "text model", title: row.spec }, [row.label, chosen ? el("span", { class: "count",
        text: state.a === row.index ? " (A)" : " (B)" }) : null, trainingCurvesNode(row, table.id)]),
      el("td", { class: "text", text: row.train_on || "untrained" }),
      el("td", { class: "text", text: row.seeds.join(",") })
    ];
    row.cells.forEach(function (cell, index) {
      cells.push(cellNode(cell));
      extrasAfter(index).forEach(function (pair) {
        var text = pair[0].cells[row.index];
        cells.push(el("td", { class: "num" + (pair[0].paper ? " paper" : "") }, [text === "-" || text === "" ?
          el("span", { class: "status", text: text || "" }) : valueNode(text)]));
      });
    });
    cells.push(row.average === null ? el("td", { class: "num" }, [el("span", { class: "status", text: "incomplete" })]) :
      el("td", { class: "num" + (row.average_mark === "best-significant" ? " best" : "") }, [valueNode(row.average_text)]));
    if (state.cost) { row.cost.forEach(function (value) { cells.push(el("td", { class: "num", text: value || "-" })); }); }
    return el("tr", { class: chosen ? "chosen" : null, "data-row": String(row.index) }, cells);
  });
  var ready = state.a !== null && state.b !== null && state.a !== state.b;
  var compare = el("button", { class: "action", type: "button", id: "compare-button", disabled: !ready,
    onclick: function () { location.hash = "#/compare/" + table.id + "/" + state.a + "/" + state.b; } },
    ["Compare A and B"]);
  return el("div", {}, [
    el("div", { class: "actions" }, [compare, el("span", { class: "count", id: "row-count",
      text: visible.length + " of " + table.rows.length + " rows shown" + (ready ? "" : "; choose two different rows") })]),
    el("div", { class: "scroll" }, [el("table", { class: "board", id: "board" }, [
      el("thead", {}, [el("tr", {}, heads)]), el("tbody", {}, body)])])
  ]);
}

/* ---------------------------------------------------------------- compare */
function pairFile(id, a, b) {
  var low = Math.min(a, b), high = Math.max(a, b);
  return "data/compare/" + id + "/" + low + "-" + high + ".json";
}

function viewCompare(id, a, b) {
  return Promise.all([fetchJSON("data/tables/" + id + ".json"), fetchJSON(pairFile(id, a, b))]).then(function (got) {
    var table = got[0], pair = got[1];
    var rowA = table.rows[pair.a], rowB = table.rows[pair.b];
    setCrumbs([{ text: "index", href: "#/" }, { text: table.family, href: "#/table/" + id }, { text: "compare" }]);
    var nodes = [el("h1", { text: "Compare: " + rowA.label + " vs " + rowB.label }),
      el("dl", { class: "facts" }, [
        el("dt", { text: "A" }), el("dd", { id: "row-a-label", text: rowA.label + " (" + rowA.model_key + ")" }),
        el("dt", { text: "B" }), el("dd", { id: "row-b-label", text: rowB.label + " (" + rowB.model_key + ")" }),
        el("dt", { text: "seeds pooled" }), el("dd", { text: pair.seeds.join(", ") || "none in common" })])];
    if (pair.a !== a) {
      nodes.push(el("p", { class: "note", text: "A is the row listed first in the table's ranking; the difference is A - B." }));
    }
    if (pair.reason) {
      nodes.push(el("p", { class: "reason", text: pair.reason }));
      show(nodes, "compare"); return;
    }
    var heads = ["task", "A", "B", "A - B", "decides", "95% interval (deciding unit)", "p", "p (Holm)", "verdict",
      "examples: interval, p", "examples", "seeds A/B", ""];
    var body = pair.tasks.map(function (task, column) {
      if (task.result === null) {
        return el("tr", { "data-task": task.task }, [el("td", { class: "text", text: task.task }),
          el("td", { class: "reason", colspan: String(heads.length - 1), text: "not comparable: " + task.reason })]);
      }
      var e = task.over_examples;
      var examplesLink = table.examples[table.columns[column]] ?
        el("a", { class: "action", href: "#/examples/" + id + "/" + pair.a + "/" + pair.b + "/" + column,
          text: "examples" }) : el("span", { class: "count", text: "no per-example data" });
      return el("tr", { "data-task": task.task }, [
        el("td", { class: "text", text: task.task }),
        el("td", { class: "num", text: fixed(task.score_a, 2) }),
        el("td", { class: "num", text: fixed(task.score_b, 2) }),
        el("td", { class: "num" + (task.verdict === "significant" ? " best" : ""), "data-value": String(task.difference),
          text: signed(task.difference, 2) + (task.verdict === "significant" ? " *" : "") }),
        el("td", { class: "text", text: task.unit }),
        el("td", { class: "num", text: task.interval ? "[" + signed(task.interval[0], 2) + ", " + signed(task.interval[1], 2) + "]" : "too few seeds to tell" }),
        el("td", { class: "num", "data-value": task.p_value === null ? "" : String(task.p_value), text: task.p_value === null ? "" : fixed(task.p_value, 4) }),
        el("td", { class: "num", text: task.p_holm === null ? "" : fixed(task.p_holm, 4) }),
        el("td", { class: "text verdict-" + task.verdict.replace(/ /g, "-"), text: task.verdict }),
        el("td", { class: "num", text: "[" + signed(e.interval[0], 2) + ", " + signed(e.interval[1], 2) + "], p=" + fixed(e.p_value, 4) }),
        el("td", { class: "num", text: String(task.examples) }),
        el("td", { class: "num", text: task.seeds_a + "/" + task.seeds_b }),
        el("td", {}, [examplesLink])
      ]);
    });
    nodes.push(el("div", { class: "scroll" }, [el("table", { id: "compare-table" }, [
      el("thead", {}, [el("tr", {}, heads.map(function (name) { return el("th", { scope: "col", class: "text", text: name }); }))]),
      el("tbody", {}, body)])]));
    nodes.push(el("p", { class: "note", text: "* significant by the deciding unit after Holm's correction across the " +
      "tasks (p < 0.05). examples: paired bootstrap over the test examples, seeds held fixed; across runs: Welch t " +
      "over seeds plus the example bootstrap's variance, deciding wherever a row was trained." +
      (pair.command.indexOf("harness ") === 0 ? " The same numbers as:" : " " + pair.command + ".") }));
    if (pair.command.indexOf("harness ") === 0) { nodes.push(el("code", { class: "command", text: pair.command + " --json" })); }
    show(nodes, "compare");
  });
}

/* ---------------------------------------------------------------- examples */
function seedMean(cell, name, seeds) {
  var arrays = seeds.map(function (seed) { return cell.seeds[seed][name]; });
  return arrays[0].map(function (_, i) {
    return arrays.reduce(function (sum, values) { return sum + values[i]; }, 0) / arrays.length;
  });
}

function ranks(values) {  // 1 = highest; ties keep example order (stable)
  var order = values.map(function (v, i) { return i; });
  order.sort(function (x, y) { return values[y] - values[x] || x - y; });
  var rank = new Array(values.length);
  order.forEach(function (position, r) { rank[position] = r + 1; });
  return rank;
}

function textCells(texts, position) {
  if (texts.pairs) {
    return [el("td", { class: "sentence", text: texts.pairs[position][0] }), el("td", { class: "sentence", text: texts.pairs[position][1] })];
  }
  return [el("td", { class: "text", colspan: "2", text: "example " + position })];
}

function commonSeeds(cellA, cellB) {
  return Object.keys(cellA.seeds).filter(function (seed) { return cellB.seeds[seed]; }).sort();
}

/* STS-style (a score per pair against a gold score): the pairs where the two models' rank errors against the gold
 * differ most. Exported for the tests through window.harnessSite. */
function scoredPairDifferences(cellA, cellB, limit) {
  var predictedA = seedMean(cellA, "predicted", Object.keys(cellA.seeds));
  var predictedB = seedMean(cellB, "predicted", Object.keys(cellB.seeds));
  var gold = cellA.seeds[Object.keys(cellA.seeds)[0]].gold;
  var rankA = ranks(predictedA), rankB = ranks(predictedB), rankGold = ranks(gold);
  var items = gold.map(function (value, i) {
    var errorA = Math.abs(rankA[i] - rankGold[i]), errorB = Math.abs(rankB[i] - rankGold[i]);
    return { position: i, gold: value, goldRank: rankGold[i], scoreA: predictedA[i], scoreB: predictedB[i],
             rankA: rankA[i], rankB: rankB[i], errorA: errorA, errorB: errorB, gap: errorA - errorB };
  });
  items.sort(function (x, y) { return Math.abs(y.gap) - Math.abs(x.gap) || x.position - y.position; });
  return items.slice(0, limit);
}

/* Retrieval and reranking with stored top hits: the queries whose gold rank differs most between the two models
 * (a gold document not within the ranked depth counts as depth + 1). Exported for the tests. */
function rankDifferences(hitsA, hitsB, limit) {
  function rankOf(hits, i) { return hits.gold_rank[i] || hits.depth + 1; }
  var items = hitsA.gold_rank.map(function (_, i) {
    return { position: i, rankA: hitsA.gold_rank[i], rankB: hitsB.gold_rank[i], gap: rankOf(hitsA, i) - rankOf(hitsB, i) };
  });
  items.sort(function (x, y) { return Math.abs(y.gap) - Math.abs(x.gap) || x.position - y.position; });
  return items.slice(0, limit);
}

/* A ranking task's query or document by its text (texts.queries / texts.documents, written for exactly the ids the
 * view shows): a text longer than SHORT_TEXT opens to its whole (as kept) from its first words, by mouse or
 * keyboard; the id in the title. Without the task's texts: the id. */
var SHORT_TEXT = 140;
function idNode(texts, kind, id, suffix) {
  var known = texts[kind] && Object.prototype.hasOwnProperty.call(texts[kind], id) ? texts[kind][id] : null;
  if (known === null) { return el("span", { text: (kind === "queries" ? "id " : "") + id + suffix }); }
  if (!known) { return el("span", { class: "no-text", title: "id " + id, text: "(no text in the task's data) id " + id + suffix }); }
  if (known.length <= SHORT_TEXT) { return el("span", { class: "hit-text", title: "id " + id, text: known + suffix }); }
  return el("details", { class: "hit-text", title: "id " + id }, [
    el("summary", { text: known.slice(0, SHORT_TEXT).replace(/\s+\S*$/, "") + " …" + suffix }), el("p", { text: known })]);
}

function hitsNode(top, gold, texts) {  // gold documents among the hits say so in text (never colour alone)
  var golden = {};
  gold.forEach(function (id) { golden[id] = true; });
  return el("ol", { class: texts.documents ? "hits texts" : "hits" }, top.map(function (id) {
    return el("li", { class: golden[id] ? "best" : null }, [idNode(texts, "documents", id, golden[id] ? " (gold)" : "")]);
  }));
}

function viewExamples(id, a, b, column) {
  return fetchJSON("data/tables/" + id + ".json").then(function (table) {
    var name = table.columns[column];
    var taskKey = table.task_keys[name];
    var fileA = table.cell_files[a + "-" + column], fileB = table.cell_files[b + "-" + column];
    if (!fileA || !fileB) { throw new Error("no per-example data for " + (fileA ? "row B" : "row A") + " on " + name); }
    return Promise.all([fetchJSON(fileA), fetchJSON(fileB), fetchJSON("data/texts/" + taskKey + ".json")])
      .then(function (got) {
        if (got[0].examples !== got[1].examples) {
          throw new Error("the two rows are not scored on the same test examples on " + name + " (e.g. another sample cut): no example-by-example view");
        }
        return fetchJSON("data/examples/" + got[0].examples + ".json").then(function (shared) {
          [got[0], got[1]].forEach(function (cell) {  // the gold, ids and groups every row over these examples shares
            Object.keys(cell.seeds).forEach(function (seed) {
              ["gold", "ids", "groups"].forEach(function (key) { if (shared[key]) { cell.seeds[seed][key] = shared[key]; } });
            });
          });
          drawExamples(table, a, b, column, got[0], got[1], got[2]);
        });
      });
  });
}

function drawExamples(table, a, b, column, cellA, cellB, texts) {
  var name = table.columns[column], rowA = table.rows[a], rowB = table.rows[b];
  setCrumbs([{ text: "index", href: "#/" }, { text: table.family, href: "#/table/" + table.id },
    { text: "compare", href: "#/compare/" + table.id + "/" + a + "/" + b }, { text: "examples on " + name }]);
  var nodes = [el("h1", { text: "Examples on " + name + ": " + rowA.label + " vs " + rowB.label }),
    el("dl", { class: "facts" }, [el("dt", { text: "A" }), el("dd", { text: rowA.label }),
      el("dt", { text: "B" }), el("dd", { text: rowB.label }),
      el("dt", { text: "statistic" }), el("dd", { text: cellA.statistic + " (" + cellA.aggregate + ")" })])];
  if (texts.withheld) {
    nodes.push(el("p", { class: "reason", id: "texts-withheld", text: "Texts not shown: " + texts.withheld + ". Examples are named by " +
      (cellA.seeds[Object.keys(cellA.seeds)[0]].ids ? "their ids in the task's data." : "their position in the task's test data.") }));
  }
  var heads, rows = [];
  var statistic = cellA.statistic;
  if (statistic === "spearman" || statistic === "pearson" || statistic === "average_precision") {
    nodes.push(el("p", { class: "note", text: "The 25 test pairs where the two models' errors against the gold " +
      "differ most: error = |model's rank of the pair - gold rank| among all " + cellA.seeds[Object.keys(cellA.seeds)[0]].gold.length +
      " pairs (rank 1 = most similar; scores are seed means). \"closer\" says which model ranks the pair nearer the gold." }));
    heads = ["#", "sentence 1", "sentence 2", "gold (rank)", "A score (rank)", "B score (rank)", "closer"];
    scoredPairDifferences(cellA, cellB, 25).forEach(function (item, i) {
      rows.push(el("tr", { "data-position": String(item.position) }, [el("td", { class: "num", text: String(i + 1) })].concat(textCells(texts, item.position), [
        el("td", { class: "num", text: fixed(item.gold, 2) + " (" + item.goldRank + ")" }),
        el("td", { class: "num", text: fixed(item.scoreA, 3) + " (" + item.rankA + ")" }),
        el("td", { class: "num", text: fixed(item.scoreB, 3) + " (" + item.rankB + ")" }),
        el("td", { class: "text", text: item.gap < 0 ? "A" : item.gap > 0 ? "B" : "same" })])));
    });
  } else if (statistic === "f1_macro") {
    var seeds = commonSeeds(cellA, cellB);
    var seed = seeds[0];
    nodes.push(el("p", { class: "note", text: "Documents one model classifies right and the other wrong (seed " + seed + ")." }));
    heads = ["#", "example", "", "gold", "A predicts", "B predicts", "right"];
    var gold = cellA.seeds[seed].gold, predA = cellA.seeds[seed].predicted, predB = cellB.seeds[seed].predicted;
    var count = 0;
    gold.forEach(function (value, i) {
      var rightA = predA[i] === value, rightB = predB[i] === value;
      if (rightA === rightB || count >= 50) { return; }
      count += 1;
      var ids = cellA.seeds[seed].ids;
      rows.push(el("tr", { "data-position": String(i) }, [el("td", { class: "num", text: String(count) }),
        el("td", { class: "text", colspan: "2", text: ids ? "id " + ids[i] : "example " + i }),
        el("td", { class: "num", text: String(value) }), el("td", { class: "num", text: String(predA[i]) }),
        el("td", { class: "num", text: String(predB[i]) }), el("td", { class: "text", text: rightA ? "A only" : "B only" })]));
    });
  } else if (commonSeeds(cellA, cellB).some(function (seed) { return cellA.seeds[seed].hits && cellB.seeds[seed].hits; })) {
    var hitSeed = commonSeeds(cellA, cellB).filter(function (seed) { return cellA.seeds[seed].hits && cellB.seeds[seed].hits; })[0];
    var hitsA = cellA.seeds[hitSeed].hits, hitsB = cellB.seeds[hitSeed].hits, queryIds = cellA.seeds[hitSeed].ids;
    nodes.push(el("p", { class: "note", id: "hits-note", text: "The 25 queries whose gold rank differs most between the " +
      "models (seed " + hitSeed + "): the rank of each model's best-ranked gold document (\"beyond N\": not among the " +
      "first N it ranked) and its top " + hitsA.top[0].length + " hits, gold hits marked (gold). " + (texts.queries ?
      "Queries and documents are shown by their texts (a long one opens to its whole; its id in the title)." :
      "Documents and queries are named by their ids in the task's data.") }));
    heads = ["#", "query", "gold", "A gold rank", "B gold rank", "A top hits", "B top hits", "better"];
    function rankText(hits, rank) { return rank ? String(rank) : "beyond " + hits.depth; }
    rankDifferences(hitsA, hitsB, 25).forEach(function (item, k) {
      var i = item.position;
      rows.push(el("tr", { "data-position": String(i) }, [el("td", { class: "num", text: String(k + 1) }),
        el("td", { class: "text sentence query" }, [queryIds ? idNode(texts, "queries", queryIds[i], "") : "query " + i]),
        el("td", { class: "text sentence" }, texts.documents ? [el("ul", { class: "hits texts" }, hitsA.gold[i].map(function (id) {
          return el("li", {}, [idNode(texts, "documents", id, "")]); }))] : [hitsA.gold[i].join(", ")]),
        el("td", { class: "num", text: rankText(hitsA, item.rankA) }), el("td", { class: "num", text: rankText(hitsB, item.rankB) }),
        el("td", { class: "text" }, [hitsNode(hitsA.top[i], hitsA.gold[i], texts)]),
        el("td", { class: "text" }, [hitsNode(hitsB.top[i], hitsB.gold[i], texts)]),
        el("td", { class: "text", text: item.gap < 0 ? "A" : item.gap > 0 ? "B" : "same" })]));
    });
  } else {
    var valuesA = seedMean(cellA, "values", Object.keys(cellA.seeds));
    var valuesB = seedMean(cellB, "values", Object.keys(cellB.seeds));
    var ids = cellA.seeds[Object.keys(cellA.seeds)[0]].ids;
    nodes.push(el("p", { class: "note", text: "The 25 examples (e.g. queries) whose per-example score differs most " +
      "between the models (seed means)." }));
    if (cellA.ranking) { nodes.push(el("p", { class: "reason", id: "no-hits", text: "These records store no ranked hits (written before " +
      "harness kept each query's top hits): re-evaluating the rows adds them (`harness rescore` for a trained row's " +
      "checkpoints, `harness run --overwrite` for an untrained row)." })); }
    heads = ["#", "example", "", "A", "B", "A - B", "better"];
    var order = valuesA.map(function (_, i) { return i; });
    order.sort(function (x, y) { return Math.abs(valuesB[y] - valuesA[y]) - Math.abs(valuesB[x] - valuesA[x]) || x - y; });
    order.slice(0, 25).forEach(function (i, k) {
      rows.push(el("tr", { "data-position": String(i) }, [el("td", { class: "num", text: String(k + 1) }),
        el("td", { class: "text", colspan: "2", text: ids ? "id " + ids[i] : "example " + i }),
        el("td", { class: "num", text: fixed(valuesA[i], 3) }), el("td", { class: "num", text: fixed(valuesB[i], 3) }),
        el("td", { class: "num", text: signed(valuesA[i] - valuesB[i], 3) }),
        el("td", { class: "text", text: valuesA[i] > valuesB[i] ? "A" : valuesA[i] < valuesB[i] ? "B" : "same" })]));
    });
  }
  nodes.push(el("div", { class: "scroll" }, [el("table", { id: "examples-table" }, [
    el("thead", {}, [el("tr", {}, heads.map(function (h) { return el("th", { scope: "col", class: "text", text: h }); }))]),
    el("tbody", {}, rows)])]));
  show(nodes, "examples");
}

/* ---------------------------------------------------------------- routing */
function route() {
  var parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  var done;
  if (parts[0] === "table" && parts[1]) { done = viewTable(parts[1]); }
  else if (parts[0] === "compare" && parts.length === 4) { done = viewCompare(parts[1], Number(parts[2]), Number(parts[3])); }
  else if (parts[0] === "curves" && parts.length === 3) { done = viewCurves(parts[1], Number(parts[2])); }
  else if (parts[0] === "examples" && parts.length === 5) {
    done = viewExamples(parts[1], Number(parts[2]), Number(parts[3]), Number(parts[4]));
  } else { done = viewIndex(); }
  done.catch(failure).then(function () { document.body.setAttribute("data-view", parts[0] || "index"); });
}

window.harnessSite = { scoredPairDifferences: scoredPairDifferences, ranks: ranks, rankDifferences: rankDifferences };
window.addEventListener("hashchange", function () { document.body.removeAttribute("data-view"); route(); });
route();
