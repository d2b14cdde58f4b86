// X-Ray: self-refreshing fragments and streamed job logs. Everything inserted as HTML comes
// from the server's autoescaped templates; log lines are inserted as text nodes only.
"use strict";

function refresh(el) {
  const url = el.dataset.refreshUrl;
  fetch(url, {credentials: "same-origin", headers: {"Accept": "text/html"}})
    .then((r) => (r.ok ? r.text() : Promise.reject(new Error("HTTP " + r.status))))
    .then((html) => {
      el.innerHTML = html;
      const stamp = document.getElementById("refreshed");
      if (stamp) stamp.textContent = new Date().toISOString().substring(11, 19);
      el.dispatchEvent(new CustomEvent("xray:refreshed"));
    })
    .catch(() => { /* keep the last table; the next tick retries */ });
}

function startRefresh() {
  document.querySelectorAll("[data-refresh-url]").forEach((el) => {
    const seconds = parseFloat(el.dataset.refreshS || "5");
    setInterval(() => refresh(el), Math.max(1, seconds) * 1000);
  });
}

function streamLog() {
  const pre = document.getElementById("log");
  if (!pre || !pre.dataset.streamUrl) return;
  const state = document.getElementById("log-state");
  const source = new EventSource(pre.dataset.streamUrl);
  source.onopen = () => { state.textContent = "streaming"; };
  source.onmessage = (event) => {
    pre.appendChild(document.createTextNode(JSON.parse(event.data) + "\n"));
  };
  source.addEventListener("end", (event) => {
    state.textContent = "complete (" + JSON.parse(event.data) + ")";
    source.close();
  });
  source.addEventListener("failure", (event) => {
    state.textContent = "error: " + JSON.parse(event.data);
    source.close();
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) return;
    state.textContent = "reconnecting…";
  };
}

document.addEventListener("DOMContentLoaded", () => {
  startRefresh();
  streamLog();
});
