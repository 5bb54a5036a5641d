/* harness site: two rows compared task by task (the numbers of `harness compare`, computed at build time). */
(function (site) {
"use strict";

var fetchJSON = site.fetchJSON, el = site.el, fixed = site.fixed, signed = site.signed, setCrumbs = site.setCrumbs,
  show = site.show;

/* ---------------------------------------------------------------- compare */
/* The "seen in training" lines of `harness compare` (the data's seen_in_training, e.g. "A on sts12: 32% of test
   pairs seen in training (seeds 42, 43)"): a row that trained on a task's test texts is partly compared on memory.
   ``task``: the one task the lines are of (the examples view), else null. Shown above the numbers. */
function seenOn(pair, side, task) {
  return (pair.seen_in_training || []).filter(function (line) { return line.indexOf(side + " on " + task + ": ") === 0; });
}

function seenNode(shown, task) {
  if (!shown.length) {
    return el("p", { class: "note", id: "seen-in-training", text: "Seen in training: no record of either row says " +
      "it saw " + (task === null ? "these tasks'" : task + "'s") + " test texts in training (measured from each trained " +
      "row's training data; untrained rows and the backbones' pretraining data are not measured)." });
  }
  return el("div", { class: "seen", id: "seen-in-training", role: "note" }, [
    el("strong", { text: "† Seen in training" }),
    el("span", { text: " (measured train/test overlap, as `harness compare` prints it; a difference on such a task is " +
      "partly one of memory):" }),
    el("ul", {}, shown.map(function (line) { return el("li", { text: line }); }))]);
}

function scoreNode(score, seen) {
  return el("td", { class: "num", title: seen.length ? seen.join("; ") : null },
    [fixed(score, 2) + (seen.length ? " †" : "")]);
}

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
    nodes.push(seenNode(pair.seen_in_training || [], null));
    if (pair.a !== a) {
      nodes.push(el("p", { class: "note", text: "A is the row listed first in the table's ranking; the difference is A - B." }));
    }
    if (pair.reason) {
      nodes.push(el("p", { class: "reason", text: pair.reason }));
      show(nodes, "compare"); return;
    }
    var heads = ["task", "A", "B", "A - B", "decides", "95% interval (deciding unit)", "p", "p (Holm)", "verdict",
      "detectable (80% power)", "examples: interval, p", "examples", "seeds A/B", ""];
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
        scoreNode(task.score_a, seenOn(pair, "A", task.task)),
        scoreNode(task.score_b, seenOn(pair, "B", task.task)),
        el("td", { class: "num" + (task.verdict === "significant" ? " best" : ""), "data-value": String(task.difference),
          text: signed(task.difference, 2) + (task.verdict === "significant" ? " *" : "") }),
        el("td", { class: "text", text: task.unit }),
        el("td", { class: "num", text: task.interval ? "[" + signed(task.interval[0], 2) + ", " + signed(task.interval[1], 2) + "]" : "too few seeds to tell" }),
        el("td", { class: "num", "data-value": task.p_value === null ? "" : String(task.p_value), text: task.p_value === null ? "" : fixed(task.p_value, 4) }),
        el("td", { class: "num", text: task.p_holm === null ? "" : fixed(task.p_holm, 4) }),
        el("td", { class: "text verdict-" + task.verdict.replace(/ /g, "-"), text: task.verdict, title: task.question }),
        el("td", { class: "num", text: task.detectable_difference === null ? "" : "±" + fixed(task.detectable_difference, 2) }),
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
      "tasks (p < 0.05). " + pair.units_note +
      (pair.command.indexOf("harness ") === 0 ? " The same numbers as:" : " " + pair.command + ".") }));
    if (pair.command.indexOf("harness ") === 0) { nodes.push(el("code", { class: "command", text: pair.command + " --json" })); }
    show(nodes, "compare");
  });
}

site.viewCompare = viewCompare;
site.pairFile = pairFile;
site.seenNode = seenNode;
}(window.harnessSite));
