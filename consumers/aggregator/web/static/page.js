// The runs page's script: fetch this page's part (server-rendered HTML and SVG) with the
// token when the aggregator wants one, swap it in when it changed, and poll again. No
// framework, no build step, nothing fetched from anywhere but the aggregator.
"use strict";
(function () {
  const KEY = "resultlog.token";
  const live = document.getElementById("live");
  const status = document.getElementById("status");
  const tokenForm = document.getElementById("token");
  const filters = document.getElementById("filters");
  const dialog = document.getElementById("json");
  let shown = null;
  let timer = null;

  function authHeaders() {
    const token = sessionStorage.getItem(KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }

  function filterQuery() {
    const query = new URLSearchParams();
    if (filters) {
      for (const select of filters.querySelectorAll("select")) {
        if (select.value) query.set(select.name, select.value);
      }
    }
    return query.toString();
  }

  function partUrl() {
    const query = filterQuery();
    return live.dataset.part + (query ? "?" + query : "");
  }

  function say(text, isError) {
    status.textContent = text;
    status.className = isError ? "status error" : "status";
  }

  async function refresh() {
    clearTimeout(timer);
    if (document.hidden) return; // a hidden tab asks nothing; it refreshes when shown again
    try {
      const response = await fetch(partUrl(), { headers: authHeaders(), cache: "no-store" });
      if (response.status === 401) {
        askForToken();
        return;
      }
      const text = await response.text();
      if (!response.ok) {
        showError(response.status, text);
      } else if (text !== shown) {
        live.innerHTML = text;
        shown = text;
        afterSwap();
      }
      // UTC, as every time the page shows: one time zone, said.
      say("updated " + new Date().toISOString().slice(11, 19) + " UTC", false);
    } catch (error) {
      say("cannot reach the aggregator; retrying", true);
    }
    timer = setTimeout(refresh, Number(live.dataset.every) || 2000);
  }

  function showError(code, text) {
    let detail = text;
    try {
      detail = JSON.parse(text).detail || text;
    } catch (error) {
      // not JSON: show the text as it came
    }
    const paragraph = document.createElement("p");
    paragraph.className = "error";
    paragraph.textContent = code + ": " + detail;
    live.replaceChildren(paragraph);
    shown = null;
  }

  function askForToken() {
    const refused = tokenForm.querySelector(".refused");
    refused.hidden = !sessionStorage.getItem(KEY);
    sessionStorage.removeItem(KEY);
    tokenForm.hidden = false;
    say("waiting for the token", false);
    tokenForm.querySelector("input").focus();
  }

  tokenForm.addEventListener("submit", function (event) {
    event.preventDefault();
    const input = tokenForm.querySelector("input");
    sessionStorage.setItem(KEY, input.value);
    input.value = "";
    tokenForm.hidden = true;
    refresh();
  });

  function fillSelect(select, values) {
    const current = select.value;
    const wanted = ["", ...values];
    if (current && !wanted.includes(current)) wanted.push(current);
    const have = Array.from(select.options, (option) => option.value);
    if (have.join("\n") === wanted.join("\n")) return;
    select.replaceChildren(
      ...wanted.map((value) => new Option(value || "all", value, false, value === current))
    );
  }

  function afterSwap() {
    const section = live.querySelector("section.runs");
    if (!filters || !section) return;
    fillSelect(filters.elements.benchmark, JSON.parse(section.dataset.benchmarks));
    fillSelect(filters.elements.model, JSON.parse(section.dataset.models));
  }

  if (filters) {
    const given = new URLSearchParams(location.search);
    for (const select of filters.querySelectorAll("select")) {
      const value = given.get(select.name);
      if (value) {
        // Offered until the first part lists the choices, and chosen: the first fetch asks
        // for it, so a bookmark or a reload shows what it names.
        fillSelect(select, [value]);
        select.value = value;
      }
    }
    filters.addEventListener("change", function () {
      const query = filterQuery();
      history.replaceState(null, "", location.pathname + (query ? "?" + query : ""));
      shown = null;
      refresh();
    });
  }

  // With a token, a link to JSON is fetched with it and shown here: a plain navigation
  // cannot send the Authorization header.
  document.addEventListener("click", async function (event) {
    const link = event.target.closest("a.json");
    if (!link || !sessionStorage.getItem(KEY)) return;
    event.preventDefault();
    const response = await fetch(link.href, { headers: authHeaders(), cache: "no-store" });
    let text = await response.text();
    try {
      text = JSON.stringify(JSON.parse(text), null, 2);
    } catch (error) {
      // not JSON: show it as it came
    }
    dialog.querySelector("pre").textContent = text;
    dialog.showModal();
  });

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) refresh();
  });

  refresh();
})();
