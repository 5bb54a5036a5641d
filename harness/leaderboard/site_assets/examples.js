/* harness site: the examples behind a difference on one task (STS-style pairs, retrieval queries and their
 * top hits, probe documents). The orderings are exported for the tests through window.harnessSite. */
(function (site) {
"use strict";

var fetchJSON = site.fetchJSON, el = site.el, fixed = site.fixed, signed = site.signed, setCrumbs = site.setCrumbs,
  show = site.show;

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
    return Promise.all([fetchJSON(fileA), fetchJSON(fileB), fetchJSON("data/texts/" + taskKey + ".json"),
      fetchJSON(site.pairFile(id, a, b))])
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
          var texts = got[2];  // a ranking task's texts are per set of test examples (ids differ between sample cuts)
          if (texts.examples) { texts = texts.examples[got[0].examples] || { withheld: "no texts were written for these examples" }; }
          drawExamples(table, a, b, column, got[0], got[1], texts, seenLines(got[3], a, name));
        });
      });
  });
}

/* The pair's "seen in training" lines on this task, with A and B as this view names them (the pair file's A is
   the row ranked first). */
function seenLines(pair, a, task) {
  var swap = pair.a !== a;
  return (pair.seen_in_training || []).map(function (line) {
    return swap ? line.replace(/^(A|B) on /, function (_, side) { return (side === "A" ? "B" : "A") + " on "; }) : line;
  }).filter(function (line) { return line.indexOf(" on " + task + ": ") === 1; });
}

/* Which test pairs a cell's model trained on (any of its seeds), from the cell's seen_in_training per seed, and
   what could not be marked. Exported for the tests. */
function seenPairs(cell, side) {
  var seen = {}, notes = [];
  Object.keys(cell.seeds).sort().forEach(function (seed) {
    var info = cell.seeds[seed].seen_in_training;
    if (!info) { return; }
    (info.positions || []).forEach(function (position) { seen[position] = true; });
    if (!info.positions) {
      notes.push(side + " seed " + seed + ": " + info.recorded + " test pairs seen in training, not marked: " + info.reason);
    } else if (info.positions.length !== info.recorded) {
      notes.push(side + " seed " + seed + ": " + info.positions.length + " of the " + info.recorded + " test pairs its " +
        "record counts as seen are marked (the others are in data a recipe made during training)");
    }
  });
  return { seen: seen, notes: notes };
}

function drawExamples(table, a, b, column, cellA, cellB, texts, seenInTraining) {
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
  nodes.push(site.seenNode(seenInTraining, name));
  var heads, rows = [];
  var statistic = cellA.statistic;
  if (statistic === "spearman" || statistic === "pearson" || statistic === "average_precision") {
    var seenA = seenPairs(cellA, "A"), seenB = seenPairs(cellB, "B");
    seenA.notes.concat(seenB.notes).forEach(function (line) { nodes.push(el("p", { class: "reason", text: line })); });
    var seenWord = function (position) {
      return [seenA.seen[position] ? "A" : "", seenB.seen[position] ? "B" : ""].filter(Boolean).join(" and ");
    };
    nodes.push(el("p", { class: "note", text: "The 25 test pairs where the two models' errors against the gold " +
      "differ most: error = |model's rank of the pair - gold rank| among all " + cellA.seeds[Object.keys(cellA.seeds)[0]].gold.length +
      " pairs (rank 1 = most similar; scores are seed means). \"closer\" says which model ranks the pair nearer the gold." }));
    heads = ["#", "sentence 1", "sentence 2", "gold (rank)", "A score (rank)", "B score (rank)", "closer",
      "seen in training"];
    scoredPairDifferences(cellA, cellB, 25).forEach(function (item, i) {
      var trainedOn = seenWord(item.position);
      rows.push(el("tr", { "data-position": String(item.position), class: trainedOn ? "seen-pair" : null,
        "data-seen": trainedOn || null }, [el("td", { class: "num", text: String(i + 1) + (trainedOn ? " †" : "") })].concat(textCells(texts, item.position), [
        el("td", { class: "num", text: fixed(item.gold, 2) + " (" + item.goldRank + ")" }),
        el("td", { class: "num", text: fixed(item.scoreA, 3) + " (" + item.rankA + ")" }),
        el("td", { class: "num", text: fixed(item.scoreB, 3) + " (" + item.rankB + ")" }),
        el("td", { class: "text", text: item.gap < 0 ? "A" : item.gap > 0 ? "B" : "same" }),
        el("td", { class: "text seen-cell", text: trainedOn ? "† " + trainedOn + " trained on it" : "" })])));
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

site.viewExamples = viewExamples;
site.scoredPairDifferences = scoredPairDifferences;
site.ranks = ranks;
site.rankDifferences = rankDifferences;
site.seenPairs = seenPairs;
}(window.harnessSite));
