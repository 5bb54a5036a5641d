/* harness site: the views by the URL's hash:
 *   #/                                  index of families and their tables                      (tables.js)
 *   #/table/<id>                        a table with filters, sorting and the choice of two rows (tables.js)
 *   #/curves/<id>/<row>                 a trained row's training curves                         (curves.js)
 *   #/compare/<id>/<a>/<b>              the per-task paired comparison of rows a and b (as `harness compare`,
 *                                       compare.js)
 *   #/examples/<id>/<a>/<b>/<column>    the examples behind that difference on one task         (examples.js)
 * Every number is computed by harness when the site is built (data/*.json); these scripts only show, filter,
 * sort and, for the examples view, order the stored per-example scores.
 *
 * Classic scripts, loaded in order by index.html (core.js first, app.js last): a page opened from file:// may run
 * them, which it may not ES modules. Each file adds its functions to the one namespace object window.harnessSite;
 * this one holds what every view uses (fetching, building elements, numbers, the page's frame). */
window.harnessSite = {};

(function (site) {
"use strict";

var main = document.getElementById("main");
var crumbs = document.getElementById("crumbs");
var cache = {};
var serverHint = main.innerHTML;  // index.html's own words on opening the site through a web server

function fetchJSON(path) {
  if (location.protocol === "file:") {  // browsers refuse a local page's fetch: fail() shows how to serve the site
    return Promise.reject(new Error("a page opened as a local file cannot read " + path));
  }
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
  window.scrollTo(0, 0);  // a new view starts at its top, not where the last one was scrolled to
  main.focus({ preventScroll: true });
}

function failure(error) {
  if (location.protocol === "file:") {  // a page opened as a local file may not fetch its data: say how to serve it
    main.innerHTML = serverHint;
    main.firstElementChild.id = "server-hint";
    document.title = "open through a web server · harness results";
    return;
  }
  show([el("h1", { text: "Could not load this view" }), el("p", { class: "reason", text: String(error) })], "error");
}

site.fetchJSON = fetchJSON;
site.el = el;
site.fixed = fixed;
site.signed = signed;
site.setCrumbs = setCrumbs;
site.show = show;
site.failure = failure;
}(window.harnessSite));
