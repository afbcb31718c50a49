#!/usr/bin/env python3
"""The peers of `ingot bench` (tools/bench.cpp): the same models, shapes, batch sizes,
initialisation, optimizer and loss in PyTorch or JAX, timed the same way, written as the same
JSON (bench/README.md).

  bench_peers.py --framework torch|torch-compile|jax [--device cpu|cuda] [--models mlp,cnn,lm]
                 [--steps 20] [--warmup 3] [--batch-size 128] [--lm-batch 32] [--lm-context 128]
                 [--lm-width 256] [--lm-heads 4] [--lm-blocks 4] [--lm-text PATH|none] [--seed 1337]
                 [--inputs DIR] [--json OUT]

torch-compile is PyTorch with the loss (forward and, through AOTAutograd, backward) and the Adam
step each under torch.compile (Inductor; PyTorch's "compiled optimizer" recipe).
--inputs DIR: start from the weights and train on the batch `ingot bench --save-inputs DIR` wrote
(DIR/<model>.safetensors in ingot's Keras names and layouts, DIR/<model>.batch.safetensors: x, y),
so every framework runs the same computation and the first losses agree; without it the weights
and data are drawn here from --seed (numpy), not ingot's.

Models (Keras layouts, as examples/fashion_mnist_common.h and examples/tiny_lm.h build them):
  mlp  Flatten, Dense 256 relu, Dense 128 relu, Dense 10          inputs (batch, 28, 28)
  cnn  Conv 32 3x3 relu, MaxPool 2, Conv 64 3x3 relu, MaxPool 2,
       Flatten, Dense 256 relu, Dense 10 ("valid", channels last) inputs (batch, 28, 28, 1)
  lm   token + position embeddings, pre-LayerNorm blocks of causal multi-head attention
       (Keras MultiHeadAttention: q/k/v/output projections with biases) and a Dense 4w GELU /
       Dense w MLP, a final LayerNorm, a vocabulary head (256)    inputs (batch, context) tokens
Weights: Keras's glorot_uniform kernels, zero biases, uniform(-0.05, 0.05) embeddings (Keras's
defaults). Training: Adam (lr 1e-3, beta 0.9/0.999, epsilon 1e-7: Keras's), sparse categorical
cross-entropy from logits, averaged. Data: uniform [0, 1) pixels and labels; the LM's byte windows of --lm-text (default the GPL 3 of
Debian's base-files) or random tokens.
Memory: "peak_rss_bytes" is the process's peak resident set size after each model (getrusage,
so it includes the models before it) and for the whole run.
Timing: the first step (tracing/compiling + running) is "compile_s"; then `warmup` steps; then
`steps` steps timed one by one, each ending when its loss is on the host (as train_on_batch does).
JAX only: "compile_only_s" is `jit(step).lower(state).compile()` timed before that (tracing,
lowering and XLA's compile, no step; the caches are cleared after it).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

np = None  # numpy, imported in main() so that --help works without it


def percentile(values, q):
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def synthetic(name, args, rng):
    """(x, y, batch, tokens per sample) as numpy arrays, like tools/bench.cpp's."""
    if name == "lm":
        if args.lm_text in ("", "none"):
            x = rng.integers(0, 256, size=(args.lm_batch, args.lm_context), dtype=np.int32)
            y = rng.integers(0, 256, size=(args.lm_batch, args.lm_context), dtype=np.int32)
        else:  # byte windows of the text and their next bytes, as ingot bench --lm-text
            text = np.frombuffer(open(args.lm_text, "rb").read(), dtype=np.uint8).astype(np.int32)
            starts = rng.integers(0, len(text) - args.lm_context, size=args.lm_batch)
            x = np.stack([text[s:s + args.lm_context] for s in starts])
            y = np.stack([text[s + 1:s + 1 + args.lm_context] for s in starts])
        return x, y, args.lm_batch, args.lm_context
    shape = (args.batch_size, 28, 28) if name == "mlp" else (args.batch_size, 28, 28, 1)
    x = rng.random(shape, dtype=np.float32)
    y = rng.integers(0, 10, size=(args.batch_size,), dtype=np.int32)
    return x, y, args.batch_size, 0


def glorot(rng, fan_in, fan_out, shape):
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def init_params(name, args, rng):
    """The models' weights as a dict of numpy arrays (Keras layouts: Dense kernels (in, out),
    conv kernels (kh, kw, in, out))."""
    p = {}

    def dense(key, n_in, n_out):
        p[key + ".w"] = glorot(rng, n_in, n_out, (n_in, n_out))
        p[key + ".b"] = np.zeros((n_out,), np.float32)

    if name == "mlp":
        dense("d1", 784, 256), dense("d2", 256, 128), dense("d3", 128, 10)
    elif name == "cnn":
        p["c1.w"] = glorot(rng, 9 * 1, 9 * 32, (3, 3, 1, 32))
        p["c1.b"] = np.zeros((32,), np.float32)
        p["c2.w"] = glorot(rng, 9 * 32, 9 * 64, (3, 3, 32, 64))
        p["c2.b"] = np.zeros((64,), np.float32)
        dense("d1", 5 * 5 * 64, 256), dense("d2", 256, 10)
    else:
        w = args.lm_width
        p["tok"] = rng.uniform(-0.05, 0.05, size=(256, w)).astype(np.float32)
        p["pos"] = rng.uniform(-0.05, 0.05, size=(args.lm_context, w)).astype(np.float32)
        for i in range(args.lm_blocks):
            for ln in ("ln1", "ln2"):
                p[f"b{i}.{ln}.g"] = np.ones((w,), np.float32)
                p[f"b{i}.{ln}.b"] = np.zeros((w,), np.float32)
            for proj in ("q", "k", "v", "o"):
                dense(f"b{i}.{proj}", w, w)
            dense(f"b{i}.up", w, 4 * w), dense(f"b{i}.down", 4 * w, w)
        p["lnf.g"] = np.ones((w,), np.float32)
        p["lnf.b"] = np.zeros((w,), np.float32)
        dense("head", w, 256)
    return p


def ingot_names(name, args):
    """peer key -> (ingot variable name, reshape to): the Keras auto-names ingot's bench models get
    (Model::save_weights; examples/fashion_mnist_common.h, examples/tiny_lm.h: the LM's embeddings,
    final LayerNormalization and head are made before its blocks)."""
    def sfx(i):
        return "" if i == 0 else f"_{i}"
    m = {}

    def dense(key, i):
        m[key + ".w"] = (f"dense{sfx(i)}/kernel", None)
        m[key + ".b"] = (f"dense{sfx(i)}/bias", None)
    if name == "mlp":
        dense("d1", 0), dense("d2", 1), dense("d3", 2)
    elif name == "cnn":
        for i, c in enumerate(("c1", "c2")):
            m[c + ".w"] = (f"conv2d{sfx(i)}/kernel", None)
            m[c + ".b"] = (f"conv2d{sfx(i)}/bias", None)
        dense("d1", 0), dense("d2", 1)
    else:
        w = args.lm_width
        m["tok"] = ("embedding/embeddings", None)
        m["pos"] = ("embedding_1/embeddings", None)
        m["lnf.g"] = ("layer_normalization/gamma", None)
        m["lnf.b"] = ("layer_normalization/beta", None)
        dense("head", 0)
        for i in range(args.lm_blocks):
            for j, ln in enumerate(("ln1", "ln2")):
                m[f"b{i}.{ln}.g"] = (f"layer_normalization_{2 * i + 1 + j}/gamma", None)
                m[f"b{i}.{ln}.b"] = (f"layer_normalization_{2 * i + 1 + j}/beta", None)
            mha = f"multi_head_attention{sfx(i)}"
            for proj, keras in (("q", "query"), ("k", "key"), ("v", "value"), ("o", "attention_output")):
                m[f"b{i}.{proj}.w"] = (f"{mha}/{keras}/kernel", (w, w))  # (w, heads, dim) / (heads, dim, w)
                m[f"b{i}.{proj}.b"] = (f"{mha}/{keras}/bias", (w,))
            dense(f"b{i}.up", 2 * i + 1), dense(f"b{i}.down", 2 * i + 2)
    return m


def load_inputs(name, args, params):
    """The weights (as `params`' keys and shapes) and (x, y) that `ingot bench --save-inputs` wrote."""
    from safetensors.numpy import load_file
    rerun = "rerun ingot bench --save-inputs with the same options"

    def load(file):
        path = os.path.join(args.inputs, file)
        try:
            return load_file(path)
        except Exception as e:  # the reader's errors (SafetensorError, OSError) name no file
            bad_input(f"--inputs {args.inputs}: {file} is not a readable safetensors file "
                      f"({e}); {rerun}")
    weights = load(f"{name}.safetensors")
    batch = load(f"{name}.batch.safetensors")
    names = ingot_names(name, args)
    out = {}
    for key, (ingot, shape) in names.items():
        if ingot not in weights:
            bad_input(f"--inputs {args.inputs}: {name}.safetensors has no '{ingot}' "
                      f"(written for other sizes? {rerun})")
        v = weights[ingot]
        if shape is not None:  # Keras's multi-head attention layouts, checked before reshaping
            w, h = args.lm_width, args.lm_heads
            output = ingot.split("/")[-2] == "attention_output"
            if ingot.endswith("/kernel"):
                keras = (h, w // h, w) if output else (w, h, w // h)
            else:
                keras = (w,) if output else (h, w // h)
            if v.shape != keras:
                bad_input(f"--inputs {args.inputs}: '{ingot}' has shape {v.shape}, the model "
                          f"here needs {keras} (--lm-heads / --lm-width differ? {rerun})")
            v = v.reshape(shape)
        if v.shape != params[key].shape:
            bad_input(f"--inputs {args.inputs}: '{ingot}' has shape {v.shape}, the model here "
                      f"needs {params[key].shape} ({rerun} and the same sizes)")
        out[key] = np.ascontiguousarray(v, dtype=np.float32)
    unused = sorted(set(weights) - {ingot for ingot, _ in names.values()})
    if unused:
        bad_input(f"--inputs {args.inputs}: {name}.safetensors has weights this model does not "
                  f"have ({', '.join(unused[:3])}{', ...' if len(unused) > 3 else ''}: more --lm-blocks? {rerun})")
    if "x" not in batch or "y" not in batch:
        bad_input(f"--inputs {args.inputs}: {name}.batch.safetensors lacks 'x' or 'y'; {rerun}")
    x, y = batch["x"], batch["y"].astype(np.int32)
    if x.shape[0] != (args.lm_batch if name == "lm" else args.batch_size):
        bad_input(f"--inputs {args.inputs}: {name}'s batch x has shape {x.shape}; "
                  "use the same --batch-size / --lm-batch as ingot bench")
    return out, x, y


def model_inputs(name, args):
    """(params, x, y, batch, tokens per sample): from --inputs, or drawn from --seed."""
    rng = np.random.default_rng(args.seed)
    x, y, batch, tokens = synthetic(name, args, rng)
    params = init_params(name, args, np.random.default_rng(args.seed))
    if args.inputs:
        params, x, y = load_inputs(name, args, params)
    return params, x, y, batch, tokens


def peak_rss_bytes():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---- PyTorch ---------------------------------------------------------------------------------

def torch_forward(torch, F, name, args, p, x):
    if name == "mlp":
        h = x.reshape(x.shape[0], -1)
        h = F.relu(h @ p["d1.w"] + p["d1.b"])
        h = F.relu(h @ p["d2.w"] + p["d2.b"])
        return h @ p["d3.w"] + p["d3.b"]
    if name == "cnn":
        h = x.permute(0, 3, 1, 2)  # NHWC -> NCHW
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c1.w"].permute(3, 2, 0, 1), p["c1.b"])), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c2.w"].permute(3, 2, 0, 1), p["c2.b"])), 2)
        h = h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)  # flatten channels last, as Keras
        h = F.relu(h @ p["d1.w"] + p["d1.b"])
        return h @ p["d2.w"] + p["d2.b"]
    b, t = x.shape
    w, heads = args.lm_width, args.lm_heads
    h = p["tok"][x] + p["pos"][:t]
    mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    for i in range(args.lm_blocks):
        n = F.layer_norm(h, (w,), p[f"b{i}.ln1.g"], p[f"b{i}.ln1.b"], eps=1e-3)
        q, k, v = (
            (n @ p[f"b{i}.{s}.w"] + p[f"b{i}.{s}.b"]).reshape(b, t, heads, w // heads).transpose(1, 2)
            for s in ("q", "k", "v"))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(w // heads)
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        h = h + a.transpose(1, 2).reshape(b, t, w) @ p[f"b{i}.o.w"] + p[f"b{i}.o.b"]
        n = F.layer_norm(h, (w,), p[f"b{i}.ln2.g"], p[f"b{i}.ln2.b"], eps=1e-3)
        u = F.gelu(n @ p[f"b{i}.up.w"] + p[f"b{i}.up.b"])
        h = h + u @ p[f"b{i}.down.w"] + p[f"b{i}.down.b"]
    h = F.layer_norm(h, (w,), p["lnf.g"], p["lnf.b"], eps=1e-3)
    return h @ p["head.w"] + p["head.b"]


def run_torch(args, names):
    import torch
    import torch.nn.functional as F
    device = torch.device("cuda" if args.device == "cuda" else "cpu")
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    compiled = args.framework == "torch-compile"
    results = {}
    for name in names:
        params_np, x_np, y_np, batch, tokens = model_inputs(name, args)
        params = {k: torch.tensor(v, device=device, requires_grad=True) for k, v in params_np.items()}
        x = torch.tensor(x_np, device=device, dtype=torch.long if name == "lm" else torch.float32)
        y = torch.tensor(y_np, device=device, dtype=torch.long)
        opt = torch.optim.Adam(params.values(), lr=1e-3, eps=1e-7)

        def loss_of(p, x, y):
            logits = torch_forward(torch, F, name, args, p, x)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

        def adam():
            opt.step()
        loss_fn = torch.compile(loss_of) if compiled else loss_of
        adam_fn = torch.compile(adam) if compiled else adam

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(params, x, y)
            loss.backward()
            adam_fn()
            return loss.item()

        results[name] = time_steps(step, args, batch, tokens,
                                   lambda: torch.cuda.reset_peak_memory_stats() if args.device == "cuda" else None,
                                   lambda: torch.cuda.max_memory_allocated() if args.device == "cuda" else None,
                                   sum(v.numel() for v in params.values()))
        report_line(name, results[name])
    return {"framework": args.framework, "framework_version": torch.__version__, "device": args.device,
            "device_name": device_name, "models": results}


# ---- JAX -------------------------------------------------------------------------------------

def jax_forward(jax, jnp, name, args, p, x):
    if name == "mlp":
        h = x.reshape(x.shape[0], -1)
        h = jax.nn.relu(h @ p["d1.w"] + p["d1.b"])
        h = jax.nn.relu(h @ p["d2.w"] + p["d2.b"])
        return h @ p["d3.w"] + p["d3.b"]
    if name == "cnn":
        def conv(h, w, b):
            return jax.nn.relu(jax.lax.conv_general_dilated(h, w, (1, 1), "VALID",
                                                            dimension_numbers=("NHWC", "HWIO", "NHWC")) + b)

        def pool(h):
            return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = pool(conv(x, p["c1.w"], p["c1.b"]))
        h = pool(conv(h, p["c2.w"], p["c2.b"]))
        h = h.reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ p["d1.w"] + p["d1.b"])
        return h @ p["d2.w"] + p["d2.b"]
    b, t = x.shape
    w, heads = args.lm_width, args.lm_heads

    def ln(h, g, beta):
        mean = h.mean(-1, keepdims=True)
        var = ((h - mean) ** 2).mean(-1, keepdims=True)
        return (h - mean) / jnp.sqrt(var + 1e-3) * g + beta
    h = p["tok"][x] + p["pos"][:t]
    mask = jnp.tril(jnp.ones((t, t), bool))
    for i in range(args.lm_blocks):
        n = ln(h, p[f"b{i}.ln1.g"], p[f"b{i}.ln1.b"])
        q, k, v = ((n @ p[f"b{i}.{s}.w"] + p[f"b{i}.{s}.b"]).reshape(b, t, heads, w // heads).transpose(0, 2, 1, 3)
                   for s in ("q", "k", "v"))
        s = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(w // heads)
        a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1) @ v
        h = h + a.transpose(0, 2, 1, 3).reshape(b, t, w) @ p[f"b{i}.o.w"] + p[f"b{i}.o.b"]
        n = ln(h, p[f"b{i}.ln2.g"], p[f"b{i}.ln2.b"])
        h = h + jax.nn.gelu(n @ p[f"b{i}.up.w"] + p[f"b{i}.up.b"], approximate=False) @ p[f"b{i}.down.w"] \
            + p[f"b{i}.down.b"]
    h = ln(h, p["lnf.g"], p["lnf.b"])
    return h @ p["head.w"] + p["head.b"]


def run_jax(args, names):
    import jax
    import jax.numpy as jnp
    backend = "gpu" if args.device == "cuda" else "cpu"
    dev = jax.devices(backend)[0]
    results = {}
    for name in names:
        params_np, x_np, y_np, batch, tokens = model_inputs(name, args)
        params = {k: jax.device_put(v, dev) for k, v in params_np.items()}
        def zeros():
            return {k: jnp.zeros_like(v) for k, v in params.items()}
        # Distinct buffers (all are donated), every one committed to `dev` as the step's outputs
        # are: an uncommitted leaf (the step counter) made the second step compile again.
        state = jax.device_put((params, zeros(), zeros(), jnp.zeros((), jnp.int32)), dev)
        x, y = jax.device_put(x_np, dev), jax.device_put(y_np, dev)

        def loss_fn(p):
            logits = jax_forward(jax, jnp, name, args, p, x)
            logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
            return -jnp.take_along_axis(logp, y.reshape(-1, 1), axis=1).mean()

        def train_step(state):
            p, m, v, it = state
            loss, g = jax.value_and_grad(loss_fn)(p)
            it = it + 1
            lr = 1e-3 * jnp.sqrt(1 - 0.999 ** it) / (1 - 0.9 ** it)  # Keras's Adam form
            m = {k: 0.9 * m[k] + 0.1 * g[k] for k in p}
            v = {k: 0.999 * v[k] + 0.001 * g[k] * g[k] for k in p}
            p = {k: p[k] - lr * m[k] / (jnp.sqrt(v[k]) + 1e-7) for k in p}
            return (p, m, v, it), loss

        jitted = jax.jit(train_step, donate_argnums=0)
        holder = {"state": state}

        def step():
            holder["state"], loss = jitted(holder["state"])
            return float(loss)

        def peak():
            stats = dev.memory_stats() if hasattr(dev, "memory_stats") else None
            return stats.get("peak_bytes_in_use") if stats else None

        # Tracing, lowering and XLA's compile alone (JAX's ahead-of-time API): what ingot bench's
        # compile.total_s is compared with. The caches are cleared after it, so the first step
        # below compiles again as in a fresh process.
        start = time.perf_counter()
        jitted.lower(holder["state"]).compile()
        compile_only_s = time.perf_counter() - start
        jax.clear_caches()
        results[name] = time_steps(step, args, batch, tokens, lambda: None, peak,
                                   int(sum(v.size for v in params.values())))
        results[name]["compile_only_s"] = compile_only_s
        report_line(name, results[name])
    return {"framework": "jax", "framework_version": jax.__version__, "device": args.device,
            "device_name": getattr(dev, "device_kind", str(dev)), "models": results}


# ---- shared ----------------------------------------------------------------------------------

def time_steps(step, args, batch, tokens, reset_peak, peak, params):
    start = time.perf_counter()
    loss_first = step()
    compile_s = time.perf_counter() - start
    for _ in range(args.warmup):
        step()
    reset_peak()
    ms = []
    loss_last = loss_first
    for _ in range(args.steps):
        start = time.perf_counter()
        loss_last = step()
        ms.append(1e3 * (time.perf_counter() - start))
    median = statistics.median(ms)
    r = {"batch": batch, "compile_s": compile_s,
         "step_ms": {"median": median, "p10": percentile(ms, 0.1), "p90": percentile(ms, 0.9), "min": min(ms)},
         "samples_per_s": 1e3 * batch / median, "params": params, "loss_first": loss_first, "loss_last": loss_last}
    if tokens:
        r["tokens_per_s"] = 1e3 * batch * tokens / median
    p = peak()
    if p is not None:
        r["peak_bytes"] = int(p)
    r["peak_rss_bytes"] = peak_rss_bytes()
    return r


def report_line(name, r):
    print(f"{name:<4} batch {r['batch']:>4}: compile {r['compile_s']:6.2f} s, step {r['step_ms']['median']:8.3f} ms "
          f"median (p10 {r['step_ms']['p10']:.3f}, p90 {r['step_ms']['p90']:.3f}), {r['samples_per_s']:10.0f} "
          f"samples/s, loss {r['loss_first']:.4f} -> {r['loss_last']:.4f}", flush=True)


def bad_input(message):
    """A bad argument or input file: one line on stderr, exit status 2 (argparse's)."""
    print(f"bench_peers: error: {message}", file=sys.stderr)
    sys.exit(2)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line (no usage block), still exit status 2."""

    def error(self, message):
        bad_input(f"{message} (bench_peers.py --help lists the options)")


def check_framework(args):
    """Exits with one line when the framework is missing or has no GPU for --device cuda."""
    try:
        if args.inputs:
            import safetensors  # noqa: F401 (--inputs reads safetensors files)
        if args.framework in ("torch", "torch-compile"):
            import torch
            if args.device == "cuda" and not torch.cuda.is_available():
                sys.exit("bench_peers: error: --device cuda: PyTorch sees no CUDA GPU")
        else:
            import jax
            if args.device == "cuda":
                try:
                    jax.devices("gpu")
                except RuntimeError as e:
                    sys.exit(f"bench_peers: error: --device cuda: JAX has no GPU backend ({e})")
    except ImportError as e:
        sys.exit(f"bench_peers: error: --framework {args.framework}: {e}")


def main():
    ap = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", required=True, choices=["torch", "torch-compile", "jax"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--models", default="mlp,cnn,lm")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lm-batch", type=int, default=32)
    ap.add_argument("--lm-context", type=int, default=128)
    ap.add_argument("--lm-width", type=int, default=256)
    ap.add_argument("--lm-heads", type=int, default=4)
    ap.add_argument("--lm-blocks", type=int, default=4)
    ap.add_argument("--lm-text", default="/usr/share/common-licenses/GPL-3",
                    help="text whose byte windows the LM trains on (none: random tokens)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--inputs", help="weights and batches written by ingot bench --save-inputs DIR")
    ap.add_argument("--json")
    args = ap.parse_args()
    names = [m for m in args.models.split(",")]
    for m in names:
        if m not in ("mlp", "cnn", "lm"):
            ap.error(f"--models: unknown model '{m}' (use mlp, cnn, lm)")
    if len(set(names)) != len(names):
        ap.error(f"--models: a model is named twice in '{args.models}'")
    for option in ("steps", "batch_size", "lm_batch", "lm_context", "lm_width", "lm_heads", "lm_blocks"):
        if getattr(args, option) < 1:
            ap.error(f"--{option.replace('_', '-')} is {getattr(args, option)}; use a value >= 1")
    if args.warmup < 0:
        ap.error(f"--warmup is {args.warmup}; use a value >= 0")
    if args.seed < 0:
        ap.error(f"--seed is {args.seed}; use a value >= 0")
    if args.lm_width % args.lm_heads:
        ap.error(f"--lm-width {args.lm_width} is not a multiple of --lm-heads {args.lm_heads}")
    if "lm" in names and args.lm_text not in ("", "none"):
        if not os.path.isfile(args.lm_text):
            ap.error(f"--lm-text '{args.lm_text}' is not a regular file (or pass none for random tokens)")
        if os.path.getsize(args.lm_text) < args.lm_context + 1:
            ap.error(f"--lm-text '{args.lm_text}' holds fewer than --lm-context + 1 = {args.lm_context + 1} bytes")
    if args.inputs and not os.path.isdir(args.inputs):
        ap.error(f"--inputs '{args.inputs}' is not a directory (write it with ingot bench --save-inputs "
                 f"{args.inputs} --models {args.models})")
    if args.inputs:
        for m in names:
            for f in (f"{m}.safetensors", f"{m}.batch.safetensors"):
                if not os.path.isfile(os.path.join(args.inputs, f)):
                    ap.error(f"--inputs '{args.inputs}' has no {f} (write it with ingot bench --save-inputs "
                             f"{args.inputs} --models {args.models} and the same sizes)")
    if args.json:
        target = os.path.abspath(args.json)
        if os.path.isdir(target):
            ap.error(f"--json '{args.json}' is a directory")
        if not os.path.isdir(os.path.dirname(target)) or not os.access(os.path.dirname(target), os.W_OK):
            ap.error(f"--json '{args.json}': its directory does not exist or is not writable")
    global np
    try:
        import numpy
    except ImportError:
        sys.exit("bench_peers: error: numpy is missing (install python3-numpy, or use the interpreter that has "
                 f"{args.framework})")
    np = numpy
    check_framework(args)
    try:
        report = run_jax(args, names) if args.framework == "jax" else run_torch(args, names)
    except (RuntimeError, MemoryError, ValueError) as e:
        # e.g. an allocation the sizes asked for that the machine cannot hold: one line, no traceback
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        sys.exit(f"bench_peers: error: --framework {args.framework} failed: {type(e).__name__}: {first} "
                 "(smaller --batch-size / --lm-* sizes need less memory)")
    report.update({"steps": args.steps, "warmup": args.warmup, "dtype_policy": "float32",
                   "peak_rss_bytes": peak_rss_bytes(), "inputs": args.inputs or "seed",
                   "config": {"batch_size": args.batch_size, "lm_batch": args.lm_batch, "lm_context": args.lm_context,
                              "lm_width": args.lm_width, "lm_heads": args.lm_heads, "lm_blocks": args.lm_blocks,
                              "lm_text": args.lm_text or "none", "seed": args.seed}})
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
