// The server's tests from a real client (tests/serve/test_server.c runs this against `specdec serve`):
//
//   node serve_client.mjs cases PORT PROMPT MAX_TOKENS STOP
//                                              the openai npm package's completions and chat calls, streamed and
//                                              not; prints {case: text | {status, message}} as one JSON line
//   node serve_client.mjs logprobs PORT PROMPT MAX_TOKENS
//                                              completions with logprobs: 3 (greedy; also target-only, specdec.draft
//                                              false; the three at once), chat with logprobs: true and
//                                              top_logprobs: 3 (temperature 0.8, seed 11), streamed and not; prints
//                                              {case: {text, logprobs}} as one JSON line, a stream's logprobs its
//                                              chunks' joined
//   node serve_client.mjs tools PORT TOOL_JSON NAME
//                                              chat with tools: [TOOL_JSON] and tool_choice naming NAME (greedy, seed 7)
//                                              and logprobs: true, top_logprobs: 2, whole and streamed
//                                              (delta.tool_calls gathered by index, as clients do; the chunks'
//                                              logprobs.content joined), then the client's own assistant message and
//                                              a tool result sent back with tool_choice "none"; prints {call,
//                                              streamed, finish_reason, completion_tokens, logprobs,
//                                              logprobs_streamed, second} as one JSON line
//   node serve_client.mjs load PORT CLIENTS REQUESTS
//                                              CLIENTS concurrent clients × REQUESTS completions each (fetch, no
//                                              retries) on token-id prompts, against the texts of the same prompts
//                                              asked one at a time first; prints {statuses, mismatches, lost,
//                                              healthy} as one JSON line (a 503 must say Retry-After: 1)
import OpenAI from "openai";

const [mode, port, ...rest] = process.argv.slice(2);
const baseURL = `http://127.0.0.1:${port}/v1`;

// A completion's text, asked whole or streamed (the pieces joined); an error as {status, message}.
async function complete(client, params) {
    try {
        if (!params.stream) return (await client.completions.create(params)).choices[0].text;
        let text = "";
        for await (const chunk of await client.completions.create(params)) text += chunk.choices[0]?.text ?? "";
        return text;
    } catch (e) {
        return { status: e.status, message: e.error?.message ?? String(e) };
    }
}

async function chat(client, params) {
    try {
        if (!params.stream) return (await client.chat.completions.create(params)).choices[0].message.content;
        let text = "";
        for await (const chunk of await client.chat.completions.create(params)) text += chunk.choices[0]?.delta?.content ?? "";
        return text;
    } catch (e) {
        return { status: e.status, message: e.error?.message ?? String(e) };
    }
}

async function cases(prompt, maxTokens, stop) {
    const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
    const base = { model: "specdec", prompt, max_tokens: maxTokens };
    const out = {};
    out.greedy = await complete(client, { ...base, temperature: 0 });
    out.greedy_stream = await complete(client, { ...base, temperature: 0, stream: true });
    out.sampled = await complete(client, { ...base, temperature: 0.8, seed: 11 });
    out.sampled_stream = await complete(client, { ...base, temperature: 0.8, seed: 11, stream: true });
    out.top_k_top_p = await complete(client, { ...base, temperature: 0.9, top_k: 20, top_p: 0.9, seed: 5 });
    out.stop = await complete(client, { ...base, temperature: 0, stop: [stop, "never generated \u00e9"] });
    out.stop_stream = await complete(client, { ...base, temperature: 0, stop, stream: true });
    const usage = await client.completions.create({ ...base, temperature: 0, max_tokens: 5 });
    out.usage = usage.usage;
    out.specdec = usage.specdec;
    out.finish_reason = usage.choices[0].finish_reason;
    const messages = [{ role: "user", content: prompt }];
    out.chat = await chat(client, { model: "specdec", messages, max_tokens: maxTokens, temperature: 0 });
    out.chat_stream = await chat(client, { model: "specdec", messages, max_completion_tokens: maxTokens,
                                           temperature: 0, stream: true });
    out.chat_sampled = await chat(client, { model: "specdec", messages, max_tokens: maxTokens, temperature: 0.8,
                                            seed: 11, stream: true });
    out.refused = await complete(client, { ...base, n: 2 });
    console.log(JSON.stringify(out));
}

// A completion's text and logprobs, whole or streamed (the chunks' lists joined, key by key).
async function completeLogprobs(client, params) {
    if (!params.stream) {
        const choice = (await client.completions.create(params)).choices[0];
        return { text: choice.text, logprobs: choice.logprobs };
    }
    const joined = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let text = "";
    for await (const chunk of await client.completions.create(params)) {
        const choice = chunk.choices[0];
        text += choice?.text ?? "";
        for (const key of Object.keys(joined)) joined[key].push(...(choice?.logprobs?.[key] ?? []));
    }
    return { text, logprobs: joined };
}

async function chatLogprobs(client, params) {
    if (!params.stream) {
        const choice = (await client.chat.completions.create(params)).choices[0];
        return { text: choice.message.content, logprobs: choice.logprobs.content };
    }
    const content = [];
    let text = "";
    for await (const chunk of await client.chat.completions.create(params)) {
        text += chunk.choices[0]?.delta?.content ?? "";
        content.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    }
    return { text, logprobs: content };
}

async function logprobs(prompt, maxTokens) {
    const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
    const base = { model: "specdec", prompt, max_tokens: maxTokens, temperature: 0, logprobs: 3 };
    const chatBase = { model: "specdec", messages: [{ role: "user", content: prompt }], max_tokens: maxTokens,
                       temperature: 0.8, seed: 11, logprobs: true, top_logprobs: 3 };
    const out = {};
    // Three sent at once, which serve --parallel runs side by side: each token's values as alone.
    [out.completion, out.completion_stream, out.completion_plain] = await Promise.all([
        completeLogprobs(client, base), completeLogprobs(client, { ...base, stream: true }),
        completeLogprobs(client, { ...base, specdec: { draft: false } })]);
    out.chat = await chatLogprobs(client, chatBase);
    out.chat_stream = await chatLogprobs(client, { ...chatBase, stream: true });
    console.log(JSON.stringify(out));
}

async function tools(tool, name) {
    const client = new OpenAI({ baseURL, apiKey: "not-needed", maxRetries: 0 });
    const params = { model: "specdec", messages: [{ role: "user", content: "Weather in Oslo?" }], max_tokens: 120,
                     temperature: 0, seed: 7, tools: [tool], tool_choice: { type: "function", function: { name } } };
    const asked = { ...params, logprobs: true, top_logprobs: 2 };
    const out = {};
    const response = await client.chat.completions.create(asked), whole = response.choices[0];
    out.call = whole.message.tool_calls?.[0] ?? null;
    out.finish_reason = whole.finish_reason;
    out.completion_tokens = response.usage?.completion_tokens ?? null;
    out.logprobs = whole.logprobs?.content ?? null;
    const gathered = [];
    out.logprobs_streamed = [];
    for await (const chunk of await client.chat.completions.create({ ...asked, stream: true })) {
        out.logprobs_streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
        for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
            const g = (gathered[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
            g.id += d.id ?? "";
            g.function.name += d.function?.name ?? "";
            g.function.arguments += d.function?.arguments ?? "";
        }
    }
    out.streamed = gathered[0] ?? null;
    const messages = [...params.messages, whole.message,
                      { role: "tool", tool_call_id: out.call?.id ?? "", content: "{\"temp\": -3}" }];
    try {
        const second = await client.chat.completions.create({ ...params, messages, tool_choice: "none",
                                                              max_tokens: 4 });
        out.second = { finish_reason: second.choices[0].finish_reason, content: second.choices[0].message.content };
    } catch (e) {
        out.second = { status: e.status, message: e.error?.message ?? String(e) };
    }
    console.log(JSON.stringify(out));
}

async function load(clients, requests) {
    const prompts = [[1, 2, 3], [7, 8], [20, 21, 22, 23], [5]];
    const ask = async (prompt) => {
        try {
            const r = await fetch(`${baseURL}/completions`, {
                method: "POST", headers: { "Content-Type": "application/json" },
                body: JSON.stringify({ prompt, max_tokens: 8, temperature: 0 }) });
            const body = await r.json();
            if (r.status === 503 && r.headers.get("retry-after") !== "1") return { status: "503 without Retry-After" };
            return { status: r.status, text: r.status === 200 ? body.choices[0].text : null };
        } catch (e) {
            return { status: 0, text: String(e) };
        }
    };
    const reference = [];
    for (const p of prompts) reference.push((await ask(p)).text);
    const statuses = {};
    let mismatches = 0, lost = 0;
    await Promise.all(Array.from({ length: clients }, async (_, c) => {
        for (let i = 0; i < requests; i++) {
            const k = (c + i) % prompts.length;
            const { status, text } = await ask(prompts[k]);
            statuses[status] = (statuses[status] ?? 0) + 1;
            if (status !== 200 && status !== 503) lost++;
            if (status === 200 && text !== reference[k]) mismatches++;
        }
    }));
    const health = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.json()).catch(() => null);
    console.log(JSON.stringify({ statuses, mismatches, lost, healthy: health?.status === "ok", reference }));
}

if (mode === "cases") await cases(rest[0], Number(rest[1]), rest[2]);
else if (mode === "logprobs") await logprobs(rest[0], Number(rest[1]));
else if (mode === "tools") await tools(JSON.parse(rest[0]), rest[1]);
else if (mode === "load") await load(Number(rest[0]), Number(rest[1]));
else throw new Error(`unknown mode ${mode}`);
