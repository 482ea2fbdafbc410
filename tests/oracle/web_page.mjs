// The page of specdec serve (src/serve/web/) in headless Chromium, driven by puppeteer-core; tests/serve/test_server.c
// runs this against a server started with --api-key:
//
//   node web_page.mjs PORT KEY PROMPT MAX_TOKENS [SCREENSHOT.png]
//
// It loads the page, gives the key the page asks for, sends PROMPT (greedy) with Ctrl+Enter, and sets what the page
// drew — plain text, <del>, <ins> — beside the marks of the stream the page read (its response, as Chromium
// received it); likewise its figures. Then it races (with the draft, then the target alone), chats when the model
// has a template (the reply beside the same request's stream, fetched here: greedy), and reads the page at a
// phone's width. Prints one JSON line:
//   {errors, marks: {page, stream}, figures: {page, stream}, race: {with_draft, target_only, speedup}, chat:
//    {page, stream, turns} | null, overflow}
// (errors: the console's errors and the page's exceptions, less the one 401 of asking before the key was given.)
import puppeteer from "puppeteer-core";

const [port, key, prompt, maxTokens, screenshot] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const settings = { max_tokens: Number(maxTokens), temperature: 0, seed: 1 };

// ---- the stream, fetched here ------------------------------------------------------------------------------------

// The events of a stream's body, parsed.
function parse(body) {
    return body.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
}

// The chunks of a streamed request with marks.
async function chunks(path, body) {
    const response = await fetch(base + path, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
        body: JSON.stringify({ ...body, ...settings, stream: true, specdec: { marks: true } }),
    });
    return parse(await response.text());
}

// Marks as [what, text], what = "accepted", "rejected" or "own" (the target's), neighbours of one kind joined; a
// rejected draft's line breaks as ↵, as the page draws them.
function joined(marks) {
    const out = [];
    for (const [what, text] of marks) {
        const shown = what === "rejected" ? text.replaceAll("\n", "↵") : text;
        if (out.length && out.at(-1)[0] === what) out.at(-1)[1] += shown;
        else if (shown.length) out.push([what, shown]);
    }
    return out;
}

function streamMarks(events) {
    const group = (kind) => (kind === "accepted" || kind === "rejected" ? kind : "own");
    return joined(events.flatMap((e) => e.specdec?.marks ?? []).map((m) => [group(m.kind), m.text]));
}

// ---- the page ------------------------------------------------------------------------------------------------

const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu"],  // (no sandbox: the tests may run as root, in a container)
});
const out = { errors: [] };
try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1100, height: 1000 });
    page.on("console", (m) => { if (m.type() === "error") out.errors.push(m.text()); });
    page.on("pageerror", (e) => out.errors.push(String(e)));
    const streams = [];     // the page's responses from the API's completions, in order
    page.on("response", (r) => { if (r.url().endsWith("/completions")) streams.push(r); });
    await page.goto(`${base}/`, { waitUntil: "load" });

    // The key, asked for once.
    await page.waitForSelector("#key-form:not([hidden])", { timeout: 5000 });
    const refused = out.errors.findIndex((e) => e.includes("401"));
    if (refused >= 0) out.errors.splice(refused, 1);
    await page.type("#key", key);
    await page.click("#key-form button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#model").textContent.startsWith("Model "));

    // Waits for the status line to say the run ended (it was emptied before the run began).
    const ended = () => page.waitForFunction(
        () => /^(Done|Both finished|Error|Stopped)/.test(document.querySelector("#status").textContent),
        { timeout: 15000 });
    const begin = (setup) => page.evaluate((s) => {
        document.querySelector("#status").textContent = "";
        const first = document.querySelector("textarea");  // the prompt is the page's first textarea
        first.value = s.prompt;
        document.querySelector("#temperature").value = String(s.temperature);
        document.querySelector("#seed").value = String(s.seed);
        document.querySelector("#max-tokens").value = String(s.max_tokens);
    }, { ...settings, prompt, ...setup });
    const drawn = (run) => page.$eval(`${run} .stream`, (stream) => [...stream.childNodes].map(
        (n) => [n.nodeName === "DEL" ? "rejected" : n.nodeName === "INS" ? "own" : "accepted", n.textContent]));
    const text = (marks) => marks.filter(([what]) => what !== "rejected").map(([, t]) => t).join("");

    // A completion, sent with Ctrl+Enter.
    await begin({});
    await page.focus("textarea");
    await page.keyboard.down("Control");
    await page.keyboard.press("Enter");
    await page.keyboard.up("Control");
    await ended();
    const events = parse(await streams.at(-1).text());
    out.marks = { page: joined(await drawn("#run-main")), stream: streamMarks(events) };
    // The figures from the stream: the server's own, and α and Equation 1 from its rounds.
    const last = events.findLast((e) => e.specdec && !e.specdec.marks).specdec;
    const rounds = events.flatMap((e) => e.specdec?.rounds ?? []);
    const kept = rounds.reduce((sum, r) => sum + r.accepted, 0);
    const checked = rounds.reduce((sum, r) => sum + Math.min(r.gamma, r.accepted + 1), 0);
    const alpha = kept / checked;
    const expected = rounds.reduce((sum, r) => sum + (alpha === 1 ? r.gamma + 1
                                                                   : (1 - alpha ** (r.gamma + 1)) / (1 - alpha)), 0);
    out.figures = {
        page: await page.$$eval("#run-main [data-figure]", (dd) => Object.fromEntries(dd.map(
            (d) => [d.dataset.figure, d.textContent]))),
        stream: {
            rounds: String(last.target_calls),
            "tokens-per-call": last.tokens_per_target_call.toFixed(2),
            alpha: `${alpha.toFixed(2)} (${kept} of ${checked})`,
            expected: (expected / rounds.length).toFixed(2),
        },
    };

    // The race: both runs' texts and the speed-up.
    await begin({});
    await page.click("#race");
    await ended();
    out.race = {
        with_draft: text(await drawn("#run-main")),
        target_only: text(await drawn("#run-plain")),
        plain_drafts: await page.$eval("#run-plain [data-figure=alpha]", (d) => d.textContent),
        speedup: await page.$eval("#speedup", (p) => p.textContent),
    };
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

    // A chat, where the model has a template: the reply, and the conversation's two turns.
    out.chat = null;
    if (!(await page.$eval("#mode-chat", (r) => r.disabled))) {
        await page.click("#mode-chat");
        await begin({});
        await page.click("button[type=submit]");
        await ended();
        const reply = await chunks("/v1/chat/completions", { messages: [{ role: "user", content: prompt }] });
        out.chat = {
            page: await page.$eval("#transcript li:last-child", (li) => li.lastChild.textContent),
            stream: text(streamMarks(reply)),
            turns: await page.$$eval("#transcript li", (li) => li.length),
        };
    }

    // At a phone's width nothing sticks out sideways.
    await page.setViewport({ width: 360, height: 800 });
    out.overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
} catch (e) {
    out.failure = String(e);
} finally {
    await browser.close();
}
console.log(JSON.stringify(out));
