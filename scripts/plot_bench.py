#!/usr/bin/env python3
"""Draws Loom's speed relative to the vendor library per shape as an SVG bar chart.

    loom run -c EXPR --bench --json > a.json    (one document per run; repeat per shape)
    python3 scripts/plot_bench.py a.json b.json ... -o bench.svg [--png bench.png] [--title T]
    cat *.json | python3 scripts/plot_bench.py - -o bench.svg

Inputs: `loom run --bench --json` documents (docs/schema/run.schema.json; a file may hold
several, one after another, as a shell loop appends them) and `loom tune --json`
documents (docs/schema/tune.schema.json; each outcome's confirmed time against cuBLAS in
the same run: a tuned suite). One horizontal bar per shape: the ratio reference time /
Loom time (above 1.0 Loom is faster), a line at 1.0, green at or above it, orange below.
Runs without a reference (attention: Loom alone) or that failed verification are listed
under the chart, not drawn. The SVG is written by this script (no plotting library);
--png converts it with rsvg-convert or the cairosvg module, or draws the same chart with
matplotlib where neither is installed.
"""
import argparse
import html
import json
import shutil
import subprocess
import sys


def documents(text, name):
    """Every JSON document in `text` (several may follow one another)."""
    decoder = json.JSONDecoder()
    i, out = 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return out
        try:
            doc, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            sys.exit(f"plot_bench.py: {name}: not a JSON document at character {i}: {e.msg} "
                     "(give `loom run --bench --json` or `loom tune --json` output)")
        out.append(doc)


def bars_from(doc, name):
    """(label, ratio, reference, gpu, date) per measured shape; (label, why) per skipped one."""
    bars, skipped = [], []
    if doc.get("command") == "run":
        label = doc.get("expression", "a loom run")
        if not doc.get("ok", False) and "error" in doc:
            skipped.append((label, doc["error"].split("\n")[0]))
        elif not doc.get("verify", {}).get("passed", False):
            skipped.append((label, "verification failed"))
        elif not doc.get("bench"):
            skipped.append((label, "not benchmarked (run it with --bench)"))
        elif doc["bench"].get("ratio") is None:
            skipped.append((label, "timed alone: no reference library in the run"))
        else:
            bars.append((label, doc["bench"]["ratio"], doc["bench"]["reference"],
                         doc["device"]["name"], doc.get("date", "")))
    elif doc.get("command") == "tune":
        for o in doc.get("outcomes", []):
            label = o.get("expression", "?")
            if not o.get("ok"):
                skipped.append((label, o.get("error", "not tuned").split("\n")[0]))
            elif o.get("confirm_us") and o.get("reference_us"):
                bars.append((label, o["reference_us"] / o["confirm_us"], "cuBLAS", o.get("device_name", ""), ""))
            else:
                skipped.append((label, o.get("confirm_note") or "no confirmation run against cuBLAS"))
    else:
        sys.exit(f"plot_bench.py: {name}: a document of `loom {doc.get('command', '?')}`; "
                 "give `loom run --bench --json` or `loom tune --json` output")
    return bars, skipped


def svg(bars, skipped, title, subtitle):
    e = html.escape
    row_h, left, right, top = 26, 14, 70, 78
    label_w = max([len(b[0]) for b in bars] + [20]) * 6.6 + 16
    plot_w = 460
    top_ratio = max([b[1] for b in bars] + [1.0])
    x_max = max(1.2, round(top_ratio * 1.1 + 0.05, 1))
    width = int(left + label_w + plot_w + right)
    height = int(top + row_h * len(bars) + 56 + 16 * len(skipped))
    x0 = left + label_w

    def x_of(v):
        return x0 + plot_w * v / x_max

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="28" font-size="18" font-weight="bold">{e(title)}</text>',
           f'<text x="{left}" y="50" font-size="12" fill="#333">{e(subtitle)}</text>']
    bottom = top + row_h * len(bars)
    step = 0.2 if x_max <= 2 else 0.5
    v = 0.0
    while v <= x_max + 1e-9:
        x = x_of(v)
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{bottom}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle">{v:.1f}x</text>')
        v += step
    # The 1.0 line under the bars' value labels (which carry a white outline).
    one = x_of(1.0)
    out.append(f'<line x1="{one:.1f}" y1="{top - 10}" x2="{one:.1f}" y2="{bottom + 2}" stroke="#c0392b" '
               f'stroke-width="2" stroke-dasharray="6,4"/>')
    halo = 'stroke="white" stroke-width="3" paint-order="stroke"'
    for i, (label, ratio, ref, _, _) in enumerate(bars):
        y = top + i * row_h
        color = "#3a8f4f" if ratio >= 1.0 else "#e08a2c"
        out.append(f'<text x="{x0 - 8:.1f}" y="{y + 16}" font-size="11" text-anchor="end">{e(label)}</text>')
        out.append(f'<rect x="{x0:.1f}" y="{y + 4}" width="{x_of(ratio) - x0:.1f}" height="{row_h - 8}" '
                   f'fill="{color}"><title>{e(label)}: {ratio:.3f}x {e(ref)}</title></rect>')
        out.append(f'<text x="{x_of(ratio) + 5:.1f}" y="{y + 16}" font-size="11" {halo}>{ratio:.2f}x</text>')
    refs = sorted({b[2] for b in bars})
    out.append(f'<text x="{x0 + plot_w / 2:.1f}" y="{bottom + 36}" font-size="13" text-anchor="middle">'
               f'{e(" / ".join(refs))} time / Loom time (above 1.0x Loom is faster)</text>')
    for j, (label, why) in enumerate(skipped):
        out.append(f'<text x="{left}" y="{bottom + 58 + 16 * j}" font-size="11" fill="#b00">'
                   f'not drawn: {e(label)}: {e(why[:140])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def png(svg_path, png_path, bars, skipped, title, subtitle):
    """The PNG: the SVG converted by rsvg-convert or cairosvg, else the same chart drawn
    by matplotlib (the GPU machine has matplotlib and neither converter)."""
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", svg_path, "-o", png_path], check=True)
        return
    try:
        import cairosvg
        cairosvg.svg2png(url=svg_path, write_to=png_path)
        return
    except ImportError:
        pass
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench.py: --png needs rsvg-convert (apt-get install librsvg2-bin), the cairosvg "
                 "module or matplotlib (pip install cairosvg / matplotlib); the SVG is written")
    labels = [b[0] for b in bars][::-1]
    ratios = [b[1] for b in bars][::-1]
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.32 * len(bars) + 0.18 * len(skipped)))
    ax.barh(labels, ratios, color=["#3a8f4f" if r >= 1.0 else "#e08a2c" for r in ratios])
    ax.axvline(1.0, color="#c0392b", linestyle="--", linewidth=1.5)
    for y, r in enumerate(ratios):
        ax.text(r + 0.01, y, f"{r:.2f}x", va="center", fontsize=8,
                bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
    refs = " / ".join(sorted({b[2] for b in bars}))
    ax.set_xlabel(f"{refs} time / Loom time (above 1.0x Loom is faster)")
    ax.set_xlim(0, max(1.2, max(ratios) * 1.12))
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title(f"{title}\n{subtitle}", fontsize=11, loc="left")
    for j, (label, why) in enumerate(skipped):
        fig.text(0.01, 0.01 + 0.03 * j, f"not drawn: {label}: {why[:120]}", fontsize=7, color="#b00")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+", help="JSON files, or - for stdin")
    p.add_argument("-o", "--output", required=True, help="the SVG to write")
    p.add_argument("--png", help="also write this PNG (rsvg-convert or cairosvg)")
    p.add_argument("--title", help="default: Loom vs <reference> per shape")
    a = p.parse_args()
    if not a.output.endswith(".svg"):
        sys.exit(f"plot_bench.py: -o {a.output}: the chart is an SVG; give FILE.svg (and --png FILE.png for a PNG)")
    bars, skipped = [], []
    for name in a.inputs:
        text = sys.stdin.read() if name == "-" else open(name, encoding="utf-8").read()
        for doc in documents(text, name):
            b, s = bars_from(doc, name)
            bars += b
            skipped += s
    if not bars:
        sys.exit("plot_bench.py: nothing to draw: no input has a run timed against a reference "
                 + (f"({skipped[0][0]}: {skipped[0][1]})" if skipped else "(no documents)"))
    gpus = sorted({b[3] for b in bars if b[3]})
    dates = sorted({b[4][:10] for b in bars if b[4]})
    title = a.title or f"Loom vs {' / '.join(sorted({b[2] for b in bars}))} per shape"
    subtitle = ", ".join(gpus) + (" · " + (dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}") if dates else "")
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(svg(bars, skipped, title, subtitle))
    print(f"plot_bench.py: {len(bars)} shapes drawn to {a.output}" +
          (f", {len(skipped)} listed as not drawn" if skipped else ""))
    if a.png:
        png(a.output, a.png, bars, skipped, title, subtitle)
        print(f"plot_bench.py: {a.png}")


if __name__ == "__main__":
    main()
