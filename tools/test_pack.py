#!/usr/bin/python3
"""test_pack.py — tests of tools/pack.py on made-up models and streams (Debian's python3-torch, no corpus needed):
`/usr/bin/python3 tools/test_pack.py` (or `make test-tools`)."""

import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pack import packed_teacher, save_xz, whole_files  # noqa: E402
from train import GPT2, token_stream  # noqa: E402

EOT = 99


def stream_of(lengths):
    """A stream of files of the given lengths (their last token <|endoftext|>), file i's other ids all i."""
    return torch.cat([torch.tensor([i] * (n - 1) + [EOT], dtype=torch.int32) for i, n in enumerate(lengths)])


class WholeFiles(unittest.TestCase):
    def test_draws_whole_files_until_the_count_is_reached(self):
        lengths = [5, 3, 8, 2, 6, 4, 7]
        out = whole_files(stream_of(lengths), EOT, 12, seed=1)
        self.assertGreaterEqual(len(out), 12)
        self.assertEqual(out[-1].item(), EOT)
        begin, seen = 0, set()
        for end in (out == EOT).nonzero().flatten().tolist():      # every piece is one whole file
            ids = set(out[begin:end].tolist())
            self.assertEqual(len(ids), 1)
            i = ids.pop()
            self.assertEqual(end + 1 - begin, lengths[i])
            self.assertNotIn(i, seen)
            seen.add(i)
            begin = end + 1
        self.assertLess(len(out) - lengths[out[-2].item()], 12)         # it stopped at the first file past 12

    def test_the_seed_decides_the_draw(self):
        s = stream_of([5, 3, 8, 2, 6, 4, 7, 3, 3, 9])
        self.assertTrue(torch.equal(whole_files(s, EOT, 20, 7), whole_files(s, EOT, 20, 7)))
        self.assertFalse(all(torch.equal(whole_files(s, EOT, 20, 7), whole_files(s, EOT, 20, k)) for k in range(5)))


class Streams(unittest.TestCase):
    def test_train_reads_back_what_was_packed(self):
        ids = torch.randint(0, 8192, (10_000,), dtype=torch.int32)
        with tempfile.TemporaryDirectory() as d:
            save_xz(ids, os.path.join(d, "val.pt.xz"))
            back = token_stream("val", d)
        self.assertTrue(torch.equal(back.long(), ids.long()))


class Teacher(unittest.TestCase):
    def test_autocast_logits_are_the_f32_teachers_bit_for_bit(self):
        torch.manual_seed(0)
        cfg = {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32, "vocab_size": 300, "eot_id": 299}
        f32 = GPT2(cfg).eval()
        for p in f32.parameters():                                      # biases and LayerNorms away from 0 and 1
            p.data += 0.05 * torch.randn_like(p)
        packed = GPT2(cfg).eval()
        packed.load_state_dict(packed_teacher(f32.state_dict()))
        self.assertTrue(any(v.dtype == torch.bfloat16 for v in packed_teacher(f32.state_dict()).values()))
        x = torch.randint(0, 300, (3, 32))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            self.assertTrue(torch.equal(f32(x), packed(x)))
        with torch.no_grad():                                           # and without autocast they differ
            self.assertFalse(torch.equal(f32(x), packed(x)))


if __name__ == "__main__":
    unittest.main()
