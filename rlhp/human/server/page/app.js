// The labelling page: shows a leased query's two clips in sync (or one clip to rate), sends answers, and keeps
// the next query's clips loaded so that it appears the moment one is answered.
"use strict";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const KEYS = {
  ArrowLeft: "left", a: "left", 1: "left",
  ArrowRight: "right", d: "right", 2: "right",
  ArrowUp: "equal", w: "equal", e: "equal", 3: "equal",
  ArrowDown: "cant_tell", s: "cant_tell", c: "cant_tell", 4: "cant_tell",
};
// What a test or benchmark reads: ms from an answer to the next pair playing, the answers sent, the
// query shown.
const rlhp = (window.rlhp = { timings: [], sent: [], errors: [], shown: null });

let name = params.get("annotator") || localStorage.getItem("rlhp-annotator") || "";
let current = null; // {query, left, right} with <video> elements ready to show
let upcoming = null; // a Promise of the next such slot (or null when none is waiting)
let labelled = 0;
const answerTimes = [];

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(typeof data.detail === "string" ? data.detail : `HTTP ${response.status}`);
  return data;
}

function video(src) {
  const v = document.createElement("video");
  Object.assign(v, { muted: true, playsInline: true, preload: "auto", src });
  return v;
}

// A query that asks for a rating shows its left clip alone (its scale is above 0).
function slot(query) {
  const left = video(query.left), right = query.scale ? null : video(query.right);
  // Each clip restarts only with the other, so the two stay in step.
  left.addEventListener("ended", () => restart(left, right));
  const loaded = (v) => new Promise((ok) => v.readyState >= 3 ? ok() : v.addEventListener("canplay", ok, { once: true }));
  return { query, left, right, ready: Promise.all([left, right].filter(Boolean).map(loaded)) };
}

function restart(left, right) {
  for (const v of [left, right].filter(Boolean)) {
    v.currentTime = 0;
    v.play().catch(() => {});
  }
}

async function fetchNext() {
  const data = await api(`api/next?annotator=${encodeURIComponent(name)}`);
  $("pending").textContent = data.pending;
  return data.query ? slot(data.query) : null;
}

function show(next, since) {
  current = next;
  rlhp.shown = next ? next.query.query_id : null;
  $("left").replaceChildren();
  $("right").replaceChildren();
  setButtons(Boolean(next));
  if (!next) {
    $("message").textContent = "No query is waiting; new ones appear as the agent trains.";
    return;
  }
  $("message").textContent = "";
  showInstructions(next.query);
  showAnswers(next.query);
  // Placing a clip in the ranking: the left one is new, the right one ranked already.
  $("left-caption").textContent = next.query.scale ? `Rate this clip from 1 to ${next.query.scale}`
    : next.query.placing ? "New clip" : "Left";
  $("right-caption").textContent = next.query.placing ? "Ranked clip" : "Right";
  $("left").append(next.left);
  if (next.right) $("right").append(next.right);
  const playing = (v) => new Promise((ok) => v.addEventListener("playing", ok, { once: true }));
  const both = Promise.all([next.left, next.right].filter(Boolean).map(playing));
  next.ready.then(() => restart(next.left, next.right));
  if (since !== undefined) both.then(() => rlhp.timings.push(performance.now() - since));
}

// The run's instructions, when it gave any: the server renders them (raw HTML escaped).
function showInstructions(query) {
  const box = $("instructions");
  if (box.dataset.text !== query.instructions) {
    box.innerHTML = query.instructions_html;
    box.dataset.text = query.instructions;
  }
  box.hidden = !query.instructions;
}

// Rating buttons 1..scale for a clip to rate; the pair's buttons for two clips.
function showAnswers(query) {
  const box = $("ratings");
  if (query.scale && box.children.length !== query.scale) {
    box.replaceChildren(...Array.from({ length: query.scale }, (_, i) => {
      const b = document.createElement("button");
      b.dataset.rating = String(i + 1);
      b.innerHTML = `${i + 1} <kbd>${(i + 1) % 10}</kbd>`;
      b.addEventListener("click", () => answer(i + 1));
      return b;
    }));
  }
  box.hidden = !query.scale;
  $("right-figure").hidden = Boolean(query.scale);
  document.body.classList.toggle("single", Boolean(query.scale));
  for (const b of document.querySelectorAll("button.pair")) b.hidden = Boolean(query.scale);
}

function setButtons(enabled) {
  for (const b of document.querySelectorAll("button[data-label], button[data-rating]")) b.disabled = !enabled;
}

function prefetch() {
  upcoming = fetchNext().catch((err) => { $("message").textContent = err.message; return null; });
}

async function answer(label) {
  if (!current) return;
  const since = performance.now();
  const done = current;
  current = null;
  // Show the preloaded pair first, then tell the server: the person never waits on the network. The one
  // after is leased once the answer is in, since in a ranking an answer makes the clip's next comparison.
  const next = await upcoming;
  show(next, since);
  try {
    // A rating is a number (or "can't tell", sent as null) to api/ratings; a choice between clips to api/answers.
    const out = done.query.scale
      ? await api("api/ratings", { query_id: done.query.query_id, annotator: name,
        rating: label === "cant_tell" ? null : label })
      : await api("api/answers", { query_id: done.query.query_id, annotator: name, label });
    labelled = out.labelled;
    answerTimes.push(Date.now());
    rlhp.sent.push({ query_id: done.query.query_id, label });
  } catch (err) {
    rlhp.errors.push(err.message);
    $("message").textContent = `Not recorded: ${err.message}`;
  }
  prefetch();
  updateStats();
  if (!next) {
    const after = await upcoming;
    if (after && !current) { show(after, since); prefetch(); } else if (!after) waitForQueries();
  }
}

async function undo() {
  try {
    const query = await api("api/undo", { annotator: name });
    labelled = Math.max(0, labelled - 1);
    answerTimes.pop();
    rlhp.sent.push({ query_id: query.query_id, label: "undo" });
    // The one shown comes back after the undone one, unless it was the comparison that answer led to (the
    // same new clip): the server took that back with it.
    if (current && !(query.placing && current.query.placing && current.query.left === query.left)) {
      upcoming = Promise.resolve(current);
    } else prefetch();
    show(slot(query), undefined);
    updateStats();
  } catch (err) {
    $("message").textContent = `Cannot undo: ${err.message}`;
  }
}

function updateStats() {
  $("labelled").textContent = labelled;
  // Over the last minute, or since the first answer when that is sooner.
  if (answerTimes.length > 1) {
    const span = Math.max(Math.min(60_000, Date.now() - answerTimes[0]), 1000);
    const recent = answerTimes.filter((t) => Date.now() - t <= span).length;
    $("rate").textContent = (recent / (span / 60_000)).toFixed(1);
  }
}

let waiting = false;
async function waitForQueries() {
  if (waiting) return;
  waiting = true;
  while (!current) {
    await new Promise((ok) => setTimeout(ok, 1500));
    if (current) break;
    const next = await upcoming;
    if (next) { show(next); prefetch(); } else prefetch();
  }
  waiting = false;
}

// The team view: each person's answers, accuracy on gold queries (whose answer is known), agreement with the
// others, and whether the run still counts their answers.
function showTeam(status) {
  const share = (value, over) => value === null ? "–" : `${Math.round(100 * value)}% of ${over}`;
  const rows = Object.entries(status.team).map(([who, p]) => {
    const row = document.createElement("tr");
    const cells = [who, p.answers, share(p.gold_accuracy, p.gold_answers), share(p.agreement, p.compared),
      p.left_out ? `no: ${p.left_out}` : "yes"];
    for (const text of cells) row.appendChild(document.createElement("td")).textContent = text;
    if (p.left_out) row.className = "left-out";
    return row;
  });
  $("team-rows").replaceChildren(...rows);
  const mine = status.team[name];
  if (mine && mine.left_out) $("message").textContent = `Your answers no longer count (${mine.left_out}).`;
}

function refresh(status) {
  $("pending").textContent = status.pending;
  $("ranked").textContent = status.ranked_clips;
  $("groups").textContent = status.ranking_groups;
  $("ranking").hidden = !status.ranked_clips;
  showTeam(status);
  updateStats();
}

async function start() {
  localStorage.setItem("rlhp-annotator", name);
  $("who").textContent = name;
  $("signin").hidden = true;
  $("labelling").hidden = false;
  try {
    // What this person held before a reload is theirs to see again now, not when its leases run out.
    await api("api/release", { annotator: name });
    const status = await api("api/status");
    labelled = status.annotators[name] || 0;
    refresh(status);
  } catch (err) {
    $("message").textContent = err.message;
  }
  prefetch();
  const first = await upcoming;
  show(first);
  prefetch();
  if (!first) waitForQueries();
}

document.addEventListener("keydown", (event) => {
  if (event.target instanceof HTMLInputElement || event.repeat || event.ctrlKey || event.metaKey || event.altKey) return;
  const scale = current ? current.query.scale : 0;
  const digit = "1234567890".indexOf(event.key) + 1; // 0 is ten
  if (scale && digit >= 1 && digit <= scale) { event.preventDefault(); answer(digit); }
  else if (scale && KEYS[event.key] === "cant_tell") { event.preventDefault(); answer("cant_tell"); }
  else if (scale && KEYS[event.key]) return; // a choice between clips means nothing for one clip
  else if (KEYS[event.key]) { event.preventDefault(); answer(KEYS[event.key]); }
  else if (event.key === "Backspace" || event.key === "u" || event.key === "z") { event.preventDefault(); undo(); }
});
for (const b of document.querySelectorAll("button[data-label]")) b.addEventListener("click", () => answer(b.dataset.label));
$("undo").addEventListener("click", undo);
$("signin").addEventListener("submit", (event) => {
  event.preventDefault();
  name = $("name").value.trim();
  if (name) start();
});
setInterval(() => api("api/status").then(refresh).catch(() => {}), 5000);

if (name) start(); else { $("signin").hidden = false; $("name").focus(); }
