"""CPU test of the xstage diffusers backend's decision logic (xstage.diffusers_backend.decide): which calls
go to xstage (local flash_attn_fwd or the fused Ulysses layer) and which fall back to diffusers' native
backend, for what reason. Needs neither torch nor diffusers (stdlib unittest); exits 0 when all pass.
"""
import sys
import unittest
import warnings
from dataclasses import fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import xstage.diffusers_backend as xd  # noqa: E402
from xstage.diffusers_backend import CallInfo, CpInfo, decide  # noqa: E402

BASE = CallInfo(q_shape=(2, 1024, 24, 128), k_shape=(2, 1024, 24, 128), v_shape=(2, 1024, 24, 128))
CP2 = CpInfo(ulysses_degree=2)


class Paths(unittest.TestCase):
    def path(self, c):
        d = decide(c)
        return d.path if d.path != "native" else ("native", d.reason)

    def test_local_flash(self):
        self.assertEqual(self.path(BASE), "flash")
        self.assertEqual(self.path(replace(BASE, dtypes=("float16",) * 3)), "flash")
        for d in (64, 128):
            s = (1, 77, 4, d)
            self.assertEqual(self.path(replace(BASE, q_shape=s, k_shape=s, v_shape=s)), "flash")

    def test_cross_attention_local(self):
        # Wan cross-attention: local queries, full text keys, parallel_config=None -> local kernel.
        c = replace(BASE, q_shape=(2, 512, 24, 128), k_shape=(2, 77, 24, 128), v_shape=(2, 77, 24, 128))
        self.assertEqual(self.path(c), "flash")

    def test_explicit_scale(self):
        self.assertEqual(self.path(replace(BASE, scale=0.05)), "flash")
        self.assertEqual(self.path(replace(BASE, scale=0.0)), ("native", "scale"))
        self.assertEqual(self.path(replace(BASE, scale=float("nan"))), ("native", "scale"))
        self.assertEqual(self.path(replace(BASE, scale=float("inf"))), ("native", "scale"))
        # xstage takes a float32: 1e-50 rounds to 0 there (the kernel's "default"), 1e39 to inf; 1e-40 stays positive
        self.assertEqual(self.path(replace(BASE, scale=1e-50)), ("native", "scale"))
        self.assertEqual(self.path(replace(BASE, scale=1e39)), ("native", "scale"))
        self.assertEqual(self.path(replace(BASE, scale=1e-40)), "flash")

    def test_ulysses(self):
        self.assertEqual(self.path(replace(BASE, cp=CP2)), "ulysses")
        self.assertEqual(self.path(replace(BASE, cp=CpInfo(ulysses_degree=8))), "ulysses")
        self.assertEqual(self.path(replace(BASE, cp=CpInfo(ulysses_degree=1))), "ulysses")  # a group of one

    def test_fallbacks(self):
        cases = {
            "autograd": replace(BASE, needs_grad=True),
            "device": replace(BASE, device_type="cpu"),
            "arch": replace(BASE, capability=(8, 0)),
            "dtype": replace(BASE, dtypes=("float32",) * 3),
            "head_dim": replace(BASE, q_shape=(2, 64, 4, 96), k_shape=(2, 64, 4, 96), v_shape=(2, 64, 4, 96)),
            "shape": replace(BASE, q_shape=(2, 1024, 3072)),
            "gqa": replace(BASE, enable_gqa=True),
            "mask": replace(BASE, has_mask=True),
            "causal": replace(BASE, is_causal=True),
            "dropout": replace(BASE, dropout_p=0.1),
            "return_lse": replace(BASE, return_lse=True),
            "ring": replace(BASE, cp=CpInfo(ulysses_degree=1, ring_degree=2)),
            "ulysses_anything": replace(BASE, cp=CpInfo(ulysses_degree=2, ulysses_anything=True)),
            "heads_not_divisible": replace(BASE, cp=CpInfo(ulysses_degree=5)),
            "cp_cross": replace(BASE, k_shape=(2, 77, 24, 128), v_shape=(2, 77, 24, 128), cp=CP2),
            "cp_config": replace(BASE, cp=CpInfo(ulysses_degree=2, has_ulysses_mesh=False)),
        }
        for reason, c in cases.items():
            with self.subTest(reason=reason):
                self.assertEqual(self.path(c), ("native", reason))
                self.assertIn(reason, xd.REASONS)

    def test_more_fallbacks(self):
        self.assertEqual(self.path(replace(BASE, dtypes=("bfloat16", "float16", "bfloat16"))), ("native", "dtype"))
        self.assertEqual(self.path(replace(BASE, k_shape=(2, 1024, 8, 128), v_shape=(2, 1024, 8, 128))),
                         ("native", "gqa"))
        self.assertEqual(self.path(replace(BASE, v_shape=(2, 1000, 24, 128))), ("native", "shape"))
        self.assertEqual(self.path(replace(BASE, k_shape=(1, 1024, 24, 128), v_shape=(1, 1024, 24, 128))),
                         ("native", "shape"))
        self.assertEqual(self.path(replace(BASE, q_shape=(2, 0, 24, 128))), ("native", "shape"))
        self.assertEqual(self.path(replace(BASE, cp=CpInfo(ulysses_degree=2, ring_degree=2))), ("native", "ring"))
        self.assertEqual(self.path(replace(BASE, capability=(10, 0))), ("native", "arch"))
        self.assertEqual(self.path(replace(BASE, capability=None)), "flash")  # unknown: let the kernel decide
        self.assertEqual(self.path(replace(BASE, dropout_p=0.0)), "flash")

    def test_order_is_rank_independent(self):
        # The fused layer is collective, so every rank must take the same path: the decision reads only a CallInfo,
        # which holds nothing that differs between ranks (no rank, device index or tensor address; a field added
        # later that could differ fails here, and needs this argument made again), and is a pure function of it.
        per_rank = {"rank", "local_rank", "device", "device_index", "data_ptr", "ptr", "stream"}
        for cls in (CallInfo, CpInfo):
            self.assertFalse(per_rank & {f.name for f in fields(cls)}, cls.__name__)
        c = replace(BASE, has_mask=True, cp=CP2)
        self.assertEqual(decide(c), decide(replace(c)))


class Warnings(unittest.TestCase):
    def setUp(self):
        xd.reset_stats()
        self.strict = xd._opts["strict"]
        xd._opts["strict"] = False

    def tearDown(self):
        xd._opts["strict"] = self.strict
        xd.reset_stats()

    def test_warn_once_per_reason_and_count(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(3):
                xd._count("native", "mask")
            xd._count("native", "causal", "detail text")
            xd._count("flash")
            xd._count("ulysses")
        msgs = [str(x.message) for x in w if issubclass(x.category, xd.XstageFallbackWarning)]
        self.assertEqual(len(msgs), 2, msgs)
        self.assertIn("mask", msgs[0])
        self.assertIn("detail text", msgs[1])
        s = xd.stats()
        self.assertEqual((s["native"], s["flash"], s["ulysses"]), (4, 1, 1))
        self.assertEqual(s["fallbacks"], {"mask": 3, "causal": 1})

    def test_strict_raises(self):
        xd._opts["strict"] = True
        with self.assertRaises(RuntimeError):
            xd._count("native", "dtype")


class Module(unittest.TestCase):
    def test_imports_without_torch_or_diffusers(self):
        self.assertEqual(xd.BACKEND, "xstage")
        self.assertTrue(xd.DIFFUSERS_VERSION_READ)
        # (this process imported neither: the module and the decision tests above ran without them)
        self.assertNotIn("torch", sys.modules)
        self.assertNotIn("diffusers", sys.modules)
        self.assertFalse(xd.is_registered() and "diffusers" not in sys.modules)

    def test_enum_member_added(self):
        from enum import Enum

        class Name(str, Enum):
            NATIVE = "native"

        m = xd._add_enum_member(Name, "XSTAGE", "xstage")
        self.assertIs(Name("xstage"), m)
        self.assertIs(Name.XSTAGE, m)
        self.assertIn("xstage", {x.value for x in Name.__members__.values()})
        self.assertEqual([x.value for x in Name], ["native", "xstage"])
        self.assertEqual(m, "xstage")
        self.assertIs(xd._add_enum_member(Name, "XSTAGE", "xstage"), m)  # idempotent


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    n = result.testsRun
    bad = len(result.failures) + len(result.errors)
    print(f"{n - bad} passed, {bad} failed")
    sys.exit(1 if bad or not n else 0)
