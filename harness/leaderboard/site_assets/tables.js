/* harness site: the index and the tables (filters, sorting, choosing two rows, the cost view). */
(function (site) {
"use strict";

var fetchJSON = site.fetchJSON, el = site.el, fixed = site.fixed, setCrumbs = site.setCrumbs, show = site.show;

/* ---------------------------------------------------------------- index */
function firstSentence(text) {  // a matrix's description in the index; the whole of it heads its page
  var end = text.search(/(?<!\bal|\be\.g|\bi\.e)[.;] (?=[A-Z(])/);  // not at "et al. " nor before a list
  return end < 0 || end > 220 ? (text.length > 220 ? text.slice(0, 220) + "…" : text) : text.slice(0, end + 1);
}

function viewIndex() {
  setCrumbs([{ text: "index" }]);
  return fetchJSON("data/index.json").then(function (index) {
    var nodes = [el("h1", { text: "Results: every family table" }),
      el("p", { class: "note", text: "From the store folder \u201c" + index.store + "\u201d. Open a table to filter and sort it, " +
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

function viewTable(id) {
  return fetchJSON("data/tables/" + id + ".json").then(function (table) {
    setCrumbs([{ text: "index", href: "#/" }, { text: table.family + (table.title ? ": " + table.title : "") }]);
    var state = stateOf(id);
    var holder = el("div", {});
    function redraw() {
      var focused = document.activeElement && document.activeElement.getAttribute("data-column");
      var focusedId = document.activeElement && document.activeElement.id;
      var scrolled = holder.querySelector(".board-scroll");  // sorting or filtering keeps where the reader was
      var left = scrolled ? scrolled.scrollLeft : 0, top = scrolled ? scrolled.scrollTop : 0;
      holder.textContent = "";
      holder.appendChild(tableBody(table, state, redraw));
      var again = holder.querySelector(".board-scroll");
      again.scrollLeft = left;
      again.scrollTop = top;
      if (focused !== null && focused !== undefined) {
        var button = holder.querySelector('button.sort[data-column="' + focused + '"]');
        if (button) { button.focus({ preventScroll: true }); }
      } else if (focusedId) {
        var before = document.getElementById(focusedId);
        if (before) { before.focus({ preventScroll: true }); }
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
  // rank and model first, both sticky (site.css): a wide table scrolls under them, its header stays on top
  var heads = [sortHeader("rank", "rank", state, redraw, "text sticky-rank"),
    sortHeader("model", "model", state, redraw, "text sticky-model"),
    el("th", { scope: "col", class: "text", text: "A" }), el("th", { scope: "col", class: "text", text: "B" }),
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
      el("td", { class: "text num sticky-rank", text: row.rank === null ? "" : String(row.rank) }),
      el("td", { class: "text model sticky-model", title: row.spec }, [row.label, chosen ? el("span", { class: "count",
        text: state.a === row.index ? " (A)" : " (B)" }) : null, trainingCurvesNode(row, table.id)]),
      el("td", {}, [el("input", { type: "radio", name: "row-a", id: "a-" + row.index, "aria-label": "row A: " + row.label,
        checked: state.a === row.index, onchange: function () { state.a = row.index; redraw(); } })]),
      el("td", {}, [el("input", { type: "radio", name: "row-b", id: "b-" + row.index, "aria-label": "row B: " + row.label,
        checked: state.b === row.index, onchange: function () { state.b = row.index; redraw(); } })]),
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
    el("div", { class: "scroll board-scroll" }, [el("table", { class: "board", id: "board" }, [
      el("thead", {}, [el("tr", {}, heads)]), el("tbody", {}, body)])])
  ]);
}

site.viewIndex = viewIndex;
site.viewTable = viewTable;
}(window.harnessSite));
