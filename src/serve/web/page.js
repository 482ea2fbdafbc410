// page.js — the page of specdec serve (index.html): a prompt sent to the server's OpenAI API as a stream with the
// specdec.marks extension (docs/server.md), each round drawn as it comes as the paper's Figure 1 (Leviathan, Kalman &
// Matias 2023): accepted drafts as plain text, rejected drafts in <del>, the target's own tokens in <ins>; with the
// figures of the run (tokens per target call, the acceptance rate α, γ per round, tokens per second) and a plot of
// the tokens of each round. "Race" runs the same request with the draft and with the target alone, one after the
// other (so that neither slows the other), and gives the speed-up. No framework and nothing loaded from elsewhere:
// the page's Content-Security-Policy allows scripts, styles and requests from this server only.
"use strict";

const $ = (selector) => document.querySelector(selector);

// ---- the API ------------------------------------------------------------------------------------------------

let apiKey = null;          // asked once when the server wants one, kept in this variable only
let controller = null;      // aborts the request that runs (the Stop button)

function headers() {
    const h = { "Content-Type": "application/json" };
    if (apiKey !== null) h.Authorization = `Bearer ${apiKey}`;
    return h;
}

class KeyNeeded extends Error {}

// The server's answer as JSON, or an Error with its message.
async function check(response) {
    if (response.status === 401) throw new KeyNeeded("this server wants its API key");
    if (!response.ok) {
        const body = await response.json().catch(() => null);
        throw new Error(body?.error?.message ?? `the server answered ${response.status}`);
    }
    return response;
}

// Yields each server-sent event's data (parsed JSON) of a streamed response, until "data: [DONE]".
async function* events(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffered += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffered.indexOf("\n\n")) >= 0) {
            const event = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            for (const line of event.split("\n")) {
                if (!line.startsWith("data: ")) continue;
                const data = line.slice(6);
                if (data === "[DONE]") return;
                yield JSON.parse(data);
            }
        }
    }
}

// ---- the paper's figures ----------------------------------------------------------------------------------

// α measured: the drafts the target kept over those it checked — at each round, the levels up to the first
// rejection (a chain's drafts after it are never checked). Null when nothing was drafted.
function acceptance(rounds) {
    const kept = rounds.reduce((sum, r) => sum + r.accepted, 0);
    const checked = rounds.reduce((sum, r) => sum + Math.min(r.gamma, r.accepted + 1), 0);
    return checked ? { rate: kept / checked, kept, checked } : null;
}

// Equation 1 of the paper: a round of γ drafts, each kept with probability α, yields (1 − α^{γ+1}) / (1 − α)
// tokens on average (γ + 1 when α = 1).
function expectedTokens(alpha, gamma) {
    return alpha === 1 ? gamma + 1 : (1 - alpha ** (gamma + 1)) / (1 - alpha);
}

// ---- a run: its stream, its figures, its plot --------------------------------------------------------------

// What the marks' kinds are drawn as: plain text, <del>, or <ins> (whose title says which of the target's own).
const OWN = {
    resampled: "the target's correction",
    bonus: "the target's bonus token",
    target: "a round without drafts",
};

class Run {
    constructor(section) {
        this.section = section;
        this.stream = section.querySelector(".stream");
        this.figures = section.querySelector(".figures");
        this.plot = section.querySelector(".plot");
        this.reset();
        section.dataset.state = "idle";
    }

    reset() {
        this.stream.replaceChildren();
        this.figures.replaceChildren();
        this.plot.replaceChildren();
        this.rounds = [];       // {gamma, width, drafted, accepted, tokens} of each round
        this.text = "";         // the output (rejected drafts left out)
        this.final = null;      // the last chunk's specdec figures
        this.started = performance.now();
        this.section.dataset.state = "running";
    }

    // One mark: accepted text joins the plain text; a rejected draft is a <del>, the target's token an <ins>. A
    // rejected draft's line breaks are drawn as ↵, so that a struck-through newline shows.
    addMark(kind, text) {
        const last = this.stream.lastChild;
        if (kind === "accepted") {
            this.text += text;
            if (last?.nodeType === Node.TEXT_NODE) last.appendData(text);
            else this.stream.append(text);
            return;
        }
        const tag = kind === "rejected" ? "del" : "ins";
        const shown = kind === "rejected" ? text.replaceAll("\n", "↵") : text;
        if (kind !== "rejected") this.text += text;
        if (last?.nodeName === tag.toUpperCase() && last.dataset.kind === kind) {
            last.append(shown);
            return;
        }
        const mark = document.createElement(tag);
        mark.dataset.kind = kind;
        mark.title = kind === "rejected" ? "a rejected draft" : OWN[kind];
        mark.append(shown);
        this.stream.append(mark);
    }

    // A chunk of the stream: its marks and rounds (or, without marks, its text), the figures at the end.
    addChunk(chunk) {
        if (chunk.error) throw new Error(chunk.error.message);
        const ext = chunk.specdec;
        if (ext?.marks) {
            for (const mark of ext.marks) this.addMark(mark.kind, mark.text);
            this.rounds.push(...ext.rounds);
        } else if (ext) {
            this.final = ext;
        }
        this.drawFigures();
        this.drawPlot();
    }

    tokens() { return this.rounds.reduce((sum, r) => sum + r.tokens, 0); }

    // Tokens per second of decoding: the server's own time once it gave it (prefill left out), else the page's.
    tokensPerSecond() {
        if (this.final && this.final.decode_ms > 0) return this.tokens() / (this.final.decode_ms / 1000);
        const seconds = (performance.now() - this.started) / 1000;
        return seconds > 0 ? this.tokens() / seconds : 0;
    }

    // The figures, as they happen: tokens per target call (a round is one) beside what Equation 1 expects of the
    // run's α and γs, α, γ of the last round and on average, tokens per second.
    drawFigures() {
        const n = this.rounds.length;
        const alpha = acceptance(this.rounds);
        const gammas = this.rounds.map((r) => r.gamma);
        const expected = alpha ? gammas.reduce((sum, g) => sum + expectedTokens(alpha.rate, g), 0) / n : 1;
        const rows = [
            ["tokens", "tokens", String(this.tokens())],
            ["rounds", "target calls", String(n)],
            ["tokens-per-call", "tokens per target call", n ? (this.tokens() / n).toFixed(2) : "–"],
            ["expected", "… as Equation 1 expects", n ? expected.toFixed(2) : "–"],
            ["alpha", "α, drafts kept of those checked", alpha ? `${alpha.rate.toFixed(2)} (${alpha.kept} of ` +
                                                                 `${alpha.checked})` : "– (no drafts)"],
            ["gamma", "γ, last round (mean)", n ? `${gammas[n - 1]} (${(gammas.reduce((a, b) => a + b, 0) / n)
                .toFixed(2)})` : "–"],
            ["tokens-per-second", this.final ? "tokens/s (decoding)" : "tokens/s so far",
             this.tokensPerSecond().toFixed(1)],
        ];
        this.figures.replaceChildren(...rows.flatMap(([key, name, value]) => {
            const dt = document.createElement("dt");
            const dd = document.createElement("dd");
            dt.textContent = name;
            dd.textContent = value;
            dd.dataset.figure = key;
            return [dt, dd];
        }));
    }

    // Tokens per round as bars, each under a dotted outline of the most its round could give (γ + 1).
    drawPlot() {
        const ns = "http://www.w3.org/2000/svg";
        const n = this.rounds.length;
        const most = Math.max(2, ...this.rounds.map((r) => r.gamma + 1));
        const width = 300, height = 80, top = 8, step = width / Math.max(n, 24);
        const y = (tokens) => top + (height - top) * (1 - tokens / most);
        const shape = (tag, attributes, title) => {
            const element = document.createElementNS(ns, tag);
            for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
            if (title) {
                const t = document.createElementNS(ns, "title");
                t.textContent = title;
                element.append(t);
            }
            return element;
        };
        this.plot.setAttribute("viewBox", `0 0 ${width} ${height}`);
        this.plot.setAttribute("preserveAspectRatio", "none");
        const parts = [shape("line", { class: "axis", x1: 0, y1: height, x2: width, y2: height }),
                       shape("text", { x: 1, y: 6 }, null)];
        parts[1].textContent = `tokens per round (most ${most})`;
        this.rounds.forEach((r, i) => {
            const x = i * step + step * 0.1, w = step * 0.8;
            const ceiling = y(r.gamma + 1), reached = y(r.tokens);
            const what = `round ${i + 1}: γ ${r.gamma}, ${r.accepted} of ${r.drafted} drafts kept, ${r.tokens} tokens`;
            parts.push(shape("rect", { class: "most", x, y: ceiling, width: w, height: height - ceiling }));
            parts.push(shape("rect", { class: "tokens", x, y: reached, width: w, height: height - reached }, what));
        });
        this.plot.replaceChildren(...parts);
    }

    finish(state) {
        this.section.dataset.state = state;
        this.drawFigures();
    }
}

// ---- the form -----------------------------------------------------------------------------------------------

const mainRun = new Run($("#run-main"));
const plainRun = new Run($("#run-plain"));
const turns = [];           // chat: the conversation so far, [{role, content}]
let drafter = null;         // what the server drafts with (null: nothing, and no race)

function mode() { return document.querySelector("input[name=mode]:checked").value; }

function status(text) { $("#status").textContent = text; }

// The request's body: the form's settings (an empty field: the server's default; the seed: a fresh one), streamed
// with marks; draft false asks for the target alone.
function requestBody(draft) {
    const number = (id) => {
        const v = $(id).valueAsNumber;
        return Number.isFinite(v) ? v : undefined;
    };
    const body = {
        max_tokens: number("#max-tokens"),
        temperature: number("#temperature"),
        seed: number("#seed"),
        stream: true,
        specdec: { marks: true, draft },
    };
    const prompt = $("#prompt").value;
    if (mode() === "chat") body.messages = [...turns, { role: "user", content: prompt }];
    else body.prompt = prompt;
    return body;
}

// Streams one request into run.
async function stream(run, body) {
    run.reset();
    const path = body.messages ? "/v1/chat/completions" : "/v1/completions";
    const response = await check(await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body),
                                                     signal: controller.signal }));
    for await (const chunk of events(response)) run.addChunk(chunk);
    run.finish("done");
}

function busy(running) {
    $("#go").disabled = running;
    $("#race").disabled = running || drafter === null;
    $("#stop").disabled = !running;
}

// Runs `work`, with the buttons and the status line around it; a key the server wants is asked for.
async function running(work) {
    controller = new AbortController();
    busy(true);
    try {
        await work();
    } catch (e) {
        for (const run of [mainRun, plainRun]) if (run.section.dataset.state === "running") run.finish("failed");
        if (e instanceof KeyNeeded) askForKey(e.message);
        else status(e.name === "AbortError" ? "Stopped." : `Error: ${e.message}`);
    } finally {
        busy(false);
        controller = null;
    }
}

function describe(run) {
    const tps = run.tokensPerSecond().toFixed(1);
    return `${run.tokens()} tokens in ${run.rounds.length} target calls, ${tps} tokens/s`;
}

async function generate() {
    const body = requestBody($("#draft").checked);
    $("#run-plain").hidden = true;
    $("#run-main-title").textContent = body.specdec.draft ? "With the draft" : "Target only";
    $("#speedup").textContent = "";
    status("Generating…");
    await stream(mainRun, body);
    status(`Done: ${describe(mainRun)}.`);
    if (body.messages) remember(body.messages.at(-1).content, mainRun.text);
}

// The race: the same request (same seed) with the draft, then with the target alone; the speed-up is the ratio of
// their decoding rates.
async function race() {
    const seed = $("#seed");
    if (!Number.isFinite(seed.valueAsNumber)) seed.value = String(Math.floor(Math.random() * 1e9));
    $("#run-main-title").textContent = "With the draft";
    $("#run-plain").hidden = false;
    plainRun.reset();
    $("#speedup").textContent = "";
    status("Racing: with the draft first…");
    await stream(mainRun, requestBody(true));
    status("Racing: now the target alone…");
    await stream(plainRun, requestBody(false));
    const speedup = mainRun.tokensPerSecond() / plainRun.tokensPerSecond();
    $("#speedup").textContent = `Speed-up with the draft: ×${speedup.toFixed(2)} ` +
        `(${mainRun.tokensPerSecond().toFixed(1)} against ${plainRun.tokensPerSecond().toFixed(1)} tokens/s)`;
    status(`Both finished: with the draft ${describe(mainRun)}; target only ${describe(plainRun)}.`);
}

// ---- chat ---------------------------------------------------------------------------------------------------

function remember(user, assistant) {
    turns.push({ role: "user", content: user }, { role: "assistant", content: assistant });
    drawTranscript();
    $("#prompt").value = "";
}

function drawTranscript() {
    const list = $("#transcript");
    list.hidden = turns.length === 0;
    $("#clear-chat").hidden = mode() !== "chat";
    list.replaceChildren(...turns.map((turn) => {
        const item = document.createElement("li");
        const role = document.createElement("span");
        role.className = "role";
        role.textContent = `${turn.role}: `;
        item.append(role, turn.content);
        return item;
    }));
}

// ---- the key and the model ----------------------------------------------------------------------------------

function askForKey(message) {
    const form = $("#key-form");
    form.hidden = false;
    status(`${message}: enter it below.`);
    $("#key").focus();
}

// What the server serves: the model's name, whether it chats, what drafts (GET /v1/models and its extension).
async function describeModel() {
    const models = await (await check(await fetch("/v1/models", { headers: headers() }))).json();
    const model = models.data[0];
    const chat = model.specdec?.chat ?? false;
    drafter = model.specdec?.drafter ?? null;
    $("#model").textContent = `Model ${model.id}; drafting by ${drafter ?? "nothing (target only)"}` +
        (chat ? "; chat through its template." : "; no chat template (completions only).");
    $("#mode-chat").disabled = !chat;
    $("#draft").disabled = drafter === null;
    $("#draft").checked = drafter !== null;
    busy(false);
}

async function start() {
    try {
        await describeModel();
    } catch (e) {
        if (e instanceof KeyNeeded) askForKey(e.message);
        else status(`Error: ${e.message}`);
    }
}

$("#key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    apiKey = $("#key").value;
    $("#key-form").hidden = true;
    status("");
    start();
});

$("#ask").addEventListener("submit", (event) => {
    event.preventDefault();
    running(generate);
});
$("#race").addEventListener("click", () => running(race));
$("#stop").addEventListener("click", () => controller?.abort());
$("#clear-chat").addEventListener("click", () => {
    turns.length = 0;
    drawTranscript();
});
for (const radio of document.querySelectorAll("input[name=mode]")) radio.addEventListener("change", drawTranscript);
$("#prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        if (!$("#go").disabled) $("#ask").requestSubmit();
    }
});

start();
