#!/usr/bin/env python3
"""Parse a ci/bench lab run, write results.json, tables, targets and plots.

    report.py LABOUT --json docs/bench/results.json --md docs/benchmarks.md \
              --plots docs/bench [--compare OLD.json] [--note TEXT]

LABOUT is the lab output directory of ci/guest/bench.sh (runs.tsv, raw/).
The markdown file keeps everything outside the markers
<!-- BEGIN GENERATED --> / <!-- END GENERATED --> and replaces what is
between them.  Plots need matplotlib (ci/bench installs it into the lab
venv); without it the report says so and carries on.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys

BEGIN = "<!-- BEGIN GENERATED -->"
END = "<!-- END GENERATED -->"

LABELS = {
    "perftest": "perftest (raw verbs)",
    "rsverbs.msg": "rsverbs MSG",
    "rsverbs_before.msg": "rsverbs MSG (before the change)",
    "verbs.msg": "libfabric verbs MSG",
    "rsverbs.rdm": "rsverbs RDM (native)",
    "rsverbs_before.rdm": "rsverbs RDM (before the change)",
    "verbs_rxm.rdm": "libfabric verbs;ofi_rxm",
    "rsverbs_rxm.rdm": "verbs;ofi_rxm over rsverbs MSG",
    "tcp_rxm.rdm": "libfabric tcp;ofi_rxm",
}


def size_of(tok):
    m = re.fullmatch(r"([0-9.]+)([kmg]?)", tok)
    if not m:
        return None
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2)]
    return int(round(float(m.group(1)) * mult))


def last_attempt(text):
    parts = re.split(r"^=== attempt \d+:.*$", text, flags=re.M)
    return parts[-1]


def parse_pingpong(text):
    out = {}
    hdr = False
    for line in last_attempt(text).splitlines():
        f = line.split()
        if f[:2] == ["bytes", "#sent"]:
            hdr = True
            continue
        if hdr and len(f) >= 8:
            s = size_of(f[0])
            try:
                out[s] = float(f[6])
            except ValueError:
                pass
    return out


def finite(v):
    return v == v and v not in (float("inf"), float("-inf"))


def parse_perftest_lat(text, what="t_avg"):
    out, col = {}, None
    for line in last_attempt(text).splitlines():
        f = line.split()
        if f and f[0] == "#bytes":
            hdr = [x.split("[")[0] for x in f]
            col = hdr.index(what) if what in hdr else None
            continue
        if col is not None and len(f) > col and f[0].isdigit() and f[1].isdigit():
            try:
                v = float(f[col])
                if finite(v):
                    out[int(f[0])] = v
            except ValueError:
                pass
    return out


def parse_fibw_lat(text, what="p50"):
    out = {}
    for line in last_attempt(text).splitlines():
        f = line.split()
        if f and f[0] == "LAT":
            kv = dict(x.split("=", 1) for x in f[1:] if "=" in x)
            out[int(kv["size"])] = float(kv[what])
    return out


def parse_perftest_bw(text):
    """-> {size: (MB/s decimal from the message rate, Mmsg/s)}"""
    out, hdr = {}, False
    for line in last_attempt(text).splitlines():
        f = line.split()
        if f and f[0] == "#bytes":
            hdr = True
            continue
        if hdr and len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
            try:
                s, rate = int(f[0]), float(f[4])
                out[s] = (rate * s, rate)
            except ValueError:
                pass
    return out


def parse_fibw(text):
    bw, rate = {}, {}
    scale = {}
    for line in last_attempt(text).splitlines():
        f = line.split()
        if not f:
            continue
        kv = dict(x.split("=", 1) for x in f[1:] if "=" in x)
        if f[0] == "BW":
            bw[(kv["op"], int(kv["size"]))] = float(kv["MBps"])
            rate[(kv["op"], int(kv["size"]))] = float(kv["Mmsgps"])
        elif f[0] in ("SCALE", "SCALECLIENT"):
            d = {}
            for k in ("rss_kb", "pin_kb", "lck_kb"):
                a, b = kv[k].split(":")
                d[k] = (int(a), int(b))
            if "av_rss_kb" in kv:
                d["av_rss_kb"] = int(kv["av_rss_kb"])
            scale[f[0].lower()] = d
        elif f[0] == "SCALELAT":
            scale.setdefault("lat", {})[int(kv["size"])] = float(kv["usec"])
            scale.setdefault("lat_p50", {})[int(kv["size"])] = float(kv.get("p50", "nan"))
    return bw, rate, scale


def read(path):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def median(xs):
    return statistics.median(xs) if xs else None


def collect(labout, tag="", series=None):
    """tag: prefix of the series of a second boot ("b2:")."""
    runs = []
    series = {} if series is None else series  # name -> {"unit":..., "values": {size: [..]}}

    def add(name, unit, size, value):
        name = tag + name
        s = series.setdefault(name, {"unit": unit, "values": {}})
        s["values"].setdefault(size, []).append(value)

    scale = {}
    with open(os.path.join(labout, "runs.tsv")) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if len(f) < 5:
                continue
            rid, rnd, rc, secs, base = f[0], int(f[1]), int(f[2]), int(f[3]), f[4]
            text = read(os.path.join(labout, base + ".client.log"))
            run = {"id": rid, "round": rnd, "rc": rc, "secs": secs, "log": base, "boot": 2 if tag else 1}
            parts = rid.split(".")
            got = 0
            if parts[0] == "lat" and parts[1] == "perftest":
                for s, v in parse_perftest_lat(text).items():
                    add(rid, "usec", s, v)
                    got += 1
                for s, v in parse_perftest_lat(text, "t_typical").items():
                    add("med.perftest." + parts[2], "usec", s, v)
                for s, v in parse_perftest_lat(text, "t_min").items():
                    add("low.perftest." + parts[2], "usec", s, v)
            elif parts[0] == "med":
                for s, v in parse_fibw_lat(text).items():
                    add(rid, "usec", s, v)
                    got += 1
                for s, v in parse_fibw_lat(text, "min").items():
                    add("low." + rid[4:], "usec", s, v)
            elif parts[0] == "lat":
                for s, v in parse_pingpong(text).items():
                    add(rid, "usec", s, v)
                    got += 1
            elif parts[0] == "fb":
                base_id = ".".join(parts[1:3])
                lat_id = base_id + (".msg" if parts[2] == "rdm" else "")
                for s, v in parse_fibw_lat(text).items():
                    add("med." + lat_id, "usec", s, v)
                    got += 1
                for s, v in parse_fibw_lat(text, "min").items():
                    add("low." + lat_id, "usec", s, v)
                bw, rate, _ = parse_fibw(text)
                for (op, s), v in bw.items():
                    add("bw.%s.%s" % (base_id, op), "MB/s", s, v)
                    add("rate.%s.%s" % (base_id, op), "Mmsg/s", s, rate[(op, s)])
                    got += 1
            elif parts[0] == "bw" and parts[1] == "perftest":
                op = parts[2]
                for s, (mb, rate) in parse_perftest_bw(text).items():
                    add("bw.perftest.%s" % op, "MB/s", s, mb)
                    add("rate.perftest.%s" % op, "Mmsg/s", s, rate)
                    got += 1
            elif parts[0] == "bw":
                bw, rate, _ = parse_fibw(text)
                for (op, s), v in bw.items():
                    add("%s.%s" % (rid, op), "MB/s", s, v)
                    add("rate.%s.%s.%s" % (parts[1], parts[2], op), "Mmsg/s", s, rate[(op, s)])
                    got += 1
            elif parts[0] == "scale":
                _, _, sc = parse_fibw(text)
                if sc:
                    scale[rid] = sc
                    got = 1
            run["values"] = got
            if rc != 0 or got == 0:
                tail = [l for l in text.splitlines() if l.strip()][-3:]
                stail = [l for l in read(os.path.join(labout, base + ".server.log")).splitlines() if l.strip()][-3:]
                run["error"] = " | ".join(tail + stail)[-400:]
            runs.append(run)
    for s in series.values():
        s["median"] = {k: median(v) for k, v in s["values"].items()}
    return runs, series, scale


# ---------------------------------------------------------------- report --

def med(series, name, size):
    s = series.get(name)
    if not s:
        return None
    return s["median"].get(size)


def fmt(v, digits=None):
    if v is None:
        return "–"
    if digits is not None:
        return "%.*f" % (digits, v)
    if v >= 1000:
        return "%.0f" % v
    if v >= 100:
        return "%.1f" % v
    if v >= 10:
        return "%.2f" % v
    return "%.3f" % v


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def hsize(s):
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return "%d MiB" % (s >> 20)
    if s >= 1 << 10 and s % (1 << 10) == 0:
        return "%d KiB" % (s >> 10)
    return "%d B" % s


POW2 = [1 << i for i in range(3, 23)]  # 8 B .. 4 MiB


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(r) + " |")
    return "\n".join(out)


EST = (("lat", "average (fi_pingpong; perftest t_avg)"), ("med", "median (fi_bw -m lat; perftest t_typical)"),
       ("low", "minimum (fi_bw -m lat; perftest t_min)"))


def targets(series):
    """-> list of {target, results: {estimator: {status, ratio, worst_size, sizes}}}"""
    res = []

    def evaluate(num, den, sizes, limit, higher_is_better):
        rs = [(ratio(med(series, num, s), med(series, den, s)), s) for s in sizes]
        rs = [(r, s) for r, s in rs if r is not None]
        if not rs:
            return {"status": "NO DATA", "ratio": None, "worst_size": None, "sizes": 0, "limit": limit}
        r, s = min(rs) if higher_is_better else max(rs)
        ok = r >= limit if higher_is_better else r <= limit
        return {"status": "PASS" if ok else "MISS", "ratio": r, "worst_size": s, "sizes": len(rs), "limit": limit}

    small = [s for s in POW2 if s <= 1024]
    large = [s for s in POW2 if s >= 65536]
    lat_targets = [("MSG latency: rsverbs ≤ libfabric verbs at every size", "%s.rsverbs.msg", "%s.verbs.msg",
                    POW2, 1.0),
                   ("MSG latency: rsverbs ≤ 1.15 × ib_send_lat at every size", "%s.rsverbs.msg",
                    "%s.perftest.send", POW2, 1.15)]
    for m in ("msg", "tagged"):
        for rng, sizes in (("small, 8 B–1 KiB", small), ("large, 64 KiB–4 MiB", large)):
            lat_targets.append(("RDM latency, %s (%s): rsverbs native ≤ 0.8 × verbs;ofi_rxm" % (m, rng),
                                "%%s.rsverbs.rdm.%s" % m, "%%s.verbs_rxm.rdm.%s" % m, sizes, 0.8))
    for name, num, den, sizes, limit in lat_targets:
        res.append({"target": name, "results": {pre: evaluate(num % pre, den % pre, sizes, limit, False)
                                                for pre, _ in EST}})
    for op in ("send", "write", "read"):
        pre = "" if "bw.perftest.%s" % op in series else "b2:"
        sizes = sorted(s for s in series.get(pre + "bw.perftest.%s" % op, {}).get("median", {}) if s >= 65536)
        res.append({"target": "Bandwidth %s ≥ 64 KiB: rsverbs MSG ≥ 0.95 × perftest ib_%s_bw%s"
                              % (op, op, " (second boot)" if pre else ""),
                    "results": {"bw": evaluate(pre + "bw.rsverbs.msg.%s" % op, pre + "bw.perftest.%s" % op, sizes,
                                               0.95, True)}})
    return res


def lat_table(series, cols, ratios, sizes):
    cols = [c for c in cols if c[0] in series]
    ratios = [r for r in ratios if r[0] in series and r[1] in series]
    header = ["size"] + [c[1] for c in cols] + [r[2] for r in ratios]
    rows = []
    for s in sizes:
        vals = [med(series, c[0], s) for c in cols]
        if all(v is None for v in vals):
            continue
        row = [hsize(s)] + [fmt(v) for v in vals]
        for num, den, _ in ratios:
            row.append(fmt(ratio(med(series, num, s), med(series, den, s)), 2))
        rows.append(row)
    return table(header, rows)


def scale_table(scale):
    rows = []
    for rid in sorted(scale, key=lambda x: (x.split(".")[1], int(x.split(".")[2]))):
        _, c, n = rid.split(".")
        n = int(n)
        sc = scale[rid]
        srv = sc.get("scale")
        lat = sc.get("lat", {})
        if srv:
            drss = srv["rss_kb"][1] - srv["rss_kb"][0]
            dpin = srv["pin_kb"][1] - srv["pin_kb"][0]
            dlck = srv["lck_kb"][1] - srv["lck_kb"][0]
            row = [LABELS.get(c + ".rdm", c), str(n), "%d" % srv["rss_kb"][0], "%d" % drss, "%.1f" % (drss / n),
                   "%d" % dpin, "%.1f" % (dpin / n), "%d" % dlck]
        else:
            row = [LABELS.get(c + ".rdm", c), str(n)] + ["–"] * 6
        lk = sorted(lat)
        row += [fmt(lat.get(lk[0])) if lk else "–", fmt(lat.get(lk[-1])) if len(lk) > 1 else "–"]
        rows.append(row)
    hdr = ["provider", "peers", "server RSS before (kB)", "RSS growth (kB)", "per peer (kB)", "VmPin growth (kB)",
           "per peer (kB)", "VmLck growth (kB)", "latency, smallest size (µs)", "latency, largest size (µs)"]
    return table(hdr, rows)


def plots(series, scale, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        return ["(plots skipped: matplotlib not available: %s)" % e]
    made = []

    def line(ax, name, label, style="-"):
        s = series.get(name)
        if not s:
            return
        pts = sorted((k, v) for k, v in s["median"].items() if k >= 8 and k <= (4 << 20) and v)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker=".", label=label)

    def finish(fig, ax, ylabel, title):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)

    fig, axs = plt.subplots(2, 2, figsize=(13, 10))
    line(axs[1][0], "low.perftest.send", "perftest ib_send_lat (t_min)", "k--")
    line(axs[1][0], "low.rsverbs.msg", LABELS["rsverbs.msg"])
    line(axs[1][0], "low.verbs.msg", LABELS["verbs.msg"])
    line(axs[1][0], "low.rsverbs_before.msg", LABELS["rsverbs_before.msg"], ":")
    finish(fig, axs[1][0], "half round trip, minimum (µs)", "MSG latency, fastest round trip (fi_bw -m lat)")
    for c in ("rsverbs", "verbs_rxm", "rsverbs_rxm", "tcp_rxm"):
        line(axs[1][1], "low.%s.rdm.msg" % c, LABELS[c + ".rdm"] + " msg")
        line(axs[1][1], "low.%s.rdm.tagged" % c, LABELS[c + ".rdm"] + " tagged", "--")
    finish(fig, axs[1][1], "half round trip, minimum (µs)", "RDM latency, fastest round trip (fi_bw -m lat)")
    axs = axs[0]
    line(axs[0], "lat.perftest.send", "perftest ib_send_lat", "k--")
    line(axs[0], "lat.perftest.write", "perftest ib_write_lat", "k:")
    line(axs[0], "lat.rsverbs.msg", LABELS["rsverbs.msg"])
    line(axs[0], "lat.verbs.msg", LABELS["verbs.msg"])
    line(axs[0], "lat.rsverbs_before.msg", LABELS["rsverbs_before.msg"], ":")
    finish(fig, axs[0], "half round trip (µs)", "MSG latency (fi_pingpong -e msg)")
    for c in ("rsverbs", "verbs_rxm", "rsverbs_rxm", "tcp_rxm"):
        line(axs[1], "lat.%s.rdm.msg" % c, LABELS[c + ".rdm"] + " msg")
        line(axs[1], "lat.%s.rdm.tagged" % c, LABELS[c + ".rdm"] + " tagged", "--")
    finish(fig, axs[1], "half round trip (µs)", "RDM latency (fi_pingpong -e rdm)")
    fig.tight_layout()
    p = os.path.join(outdir, "latency.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    made.append(p)

    fig, axs = plt.subplots(1, 3, figsize=(18, 5))
    for ax, op in zip(axs, ("send", "write", "read")):
        line(ax, "bw.perftest.%s" % op, "perftest ib_%s_bw" % op, "k--")
        for c in ("rsverbs.msg", "verbs.msg", "rsverbs.rdm", "verbs_rxm.rdm", "rsverbs_rxm.rdm", "tcp_rxm.rdm"):
            line(ax, "bw.%s.%s" % (c, op), LABELS[c])
        finish(fig, ax, "MB/s (10^6 B/s)", "bandwidth, %s (window of outstanding ops)" % op)
    fig.tight_layout()
    p = os.path.join(outdir, "bandwidth.png")
    fig.savefig(p, dpi=110)
    plt.close(fig)
    made.append(p)
    return made


def compare(series, old):
    rows = []
    for name in sorted(series):
        if name not in old.get("series", {}):
            continue
        o = old["series"][name].get("median", {})
        n = series[name]["median"]
        rs = []
        for s, v in n.items():
            ov = o.get(str(s), o.get(s))
            if ov and v:
                rs.append(v / ov)
        if rs:
            rows.append([name, series[name]["unit"], "%.2f" % min(rs), "%.2f" % statistics.median(rs),
                         "%.2f" % max(rs)])
    return table(["series", "unit", "new÷old min", "median", "max"], rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("labout")
    ap.add_argument("--json", required=True)
    ap.add_argument("--md")
    ap.add_argument("--plots")
    ap.add_argument("--compare")
    ap.add_argument("--second", help="lab output of a second boot: its series get the prefix b2:")
    ap.add_argument("--note", default="")
    ap.add_argument("--meta", default="", help="file of 'key value' lines to add to meta")
    a = ap.parse_args()

    runs, series, scale = collect(a.labout)
    if a.second:
        runs2, series, scale2 = collect(a.second, "b2:", series)
        runs += runs2
        scale.update(scale2)
        for s in series.values():
            s["median"] = {k: median(v) for k, v in s["values"].items()}
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "note": a.note}
    for f in (os.path.join(a.labout, "guest-info.txt"), a.meta):
        if f and os.path.exists(f):
            for line in read(f).splitlines():
                if " " in line:
                    k, v = line.split(" ", 1)
                    meta[k] = v.strip()
    knobs = read(os.path.join(a.labout, "bench.env")).strip().splitlines()
    meta["knobs"] = [k for k in knobs if k and not k.startswith("#")]
    tg = targets(series)
    doc = {"meta": meta, "runs": runs, "targets": tg,
           "series": {k: {"unit": v["unit"], "values": {str(s): x for s, x in sorted(v["values"].items())},
                          "median": {str(s): x for s, x in sorted(v["median"].items())}}
                      for k, v in sorted(series.items())},
           "scale": scale}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)

    made = plots(series, scale, a.plots) if a.plots else []

    g = []
    g.append("Run: %s. %s" % (meta["date"], a.note))
    g.append("")
    g.append("Guest: kernel %s, %s vCPUs, %s; %s; perftest %s; rxe MTU %s; %s. Knobs: `%s`." % (
        meta.get("kernel", "?"), meta.get("cpus", "?"),
        "%.1f GiB" % (int(meta["mem_kb"]) / 1048576) if meta.get("mem_kb", "").isdigit() else "?",
        meta.get("libfabric", "?").strip(), meta.get("perftest", "?"), meta.get("mtu", "?"),
        "server pinned to CPU 0, client to CPU 1" if meta.get("pin") == "1" else "processes not pinned",
        "; ".join(meta["knobs"])))
    g.append("")
    g.append("### Targets")
    g.append("")
    def cell(r):
        if not r or r["status"] == "NO DATA":
            return "no data"
        return "**%s** %.2f (%s)" % (r["status"], r["ratio"], hsize(r["worst_size"]))

    rows = []
    for t in tg:
        rs = t["results"]
        if "bw" in rs:
            rows.append([t["target"], cell(rs["bw"]), "", ""])
        else:
            rows.append([t["target"]] + [cell(rs.get(pre)) for pre, _ in EST])
    g.append(table(["target", "average (fi_pingpong) / bandwidth", "median (fi_bw)", "minimum (fi_bw)"], rows))
    g.append("")
    g.append("Each cell: the result, the worst ratio over the sizes compared and the size where it occurs. "
             "Latency estimators: the average of a run's round trips (fi_pingpong's `usec/xfer`, perftest's "
             "`t_avg`), their median (fi_bw -m lat, perftest's `t_typical`), their minimum (fi_bw, perftest's "
             "`t_min`); each then the median over the rounds.")
    g.append("")
    g.append("Ratios are of medians over the rounds. Latency: the ratio is rsverbs ÷ the other (lower is better); "
             "bandwidth: rsverbs ÷ perftest (higher is better).")
    g.append("")
    g.append("### MSG latency (µs, half round trip, median of rounds)")
    g.append("")
    g.append(lat_table(series, [("lat.perftest.send", "ib_send_lat"), ("lat.perftest.write", "ib_write_lat"),
                                ("lat.perftest.read", "ib_read_lat ¹"), ("lat.rsverbs.msg", "rsverbs"),
                                ("lat.rsverbs_before.msg", "rsverbs before"),
                                ("lat.verbs.msg", "libfabric verbs")],
                       [("lat.rsverbs.msg", "lat.perftest.send", "rsverbs ÷ ib_send_lat"),
                        ("lat.rsverbs.msg", "lat.verbs.msg", "rsverbs ÷ libfabric"),
                        ("lat.rsverbs_before.msg", "lat.verbs.msg", "before ÷ libfabric")], POW2))
    g.append("")
    g.append("¹ ib_read_lat reports the time of one RDMA read, a full round trip; the others report half a "
             "round trip of a ping-pong. fi_pingpong and perftest both give the average (perftest's `t_avg`).")
    g.append("")
    g.append("### RDM latency (µs, half round trip, fi_pingpong -e rdm, median of rounds)")
    g.append("")
    cols = []
    for c in ("rsverbs", "rsverbs_before", "verbs_rxm", "rsverbs_rxm", "tcp_rxm"):
        for m in ("msg", "tagged"):
            cols.append(("lat.%s.rdm.%s" % (c, m), "%s %s" % (LABELS[c + ".rdm"], m)))
    g.append(lat_table(series, cols, [("lat.rsverbs.rdm.msg", "lat.verbs_rxm.rdm.msg", "native ÷ verbs;ofi_rxm (msg)"),
                                      ("lat.rsverbs.rdm.tagged", "lat.verbs_rxm.rdm.tagged",
                                       "native ÷ verbs;ofi_rxm (tagged)"),
                                      ("lat.rsverbs_before.rdm.msg", "lat.verbs_rxm.rdm.msg",
                                       "before ÷ verbs;ofi_rxm (msg)"),
                                      ("lat.rsverbs.rdm.msg", "lat.tcp_rxm.rdm.msg", "native ÷ tcp;ofi_rxm (msg)")],
                       POW2))
    g.append("")
    g.append("### Latency medians (µs, half round trip: median of each run's round trips, fi_bw -m lat; "
             "then the median over rounds)")
    g.append("")
    g.append("Averages suffer from every scheduling stall on the shared, emulated CPUs; these medians do not. "
             "perftest's column is its `t_typical` (its median).")
    g.append("")
    cols = [("med.perftest.send", "ib_send_lat"), ("med.rsverbs.msg", "rsverbs MSG"),
            ("med.rsverbs_before.msg", "rsverbs MSG before"), ("med.verbs.msg", "libfabric verbs MSG")]
    for c in ("rsverbs", "rsverbs_before", "verbs_rxm", "rsverbs_rxm", "tcp_rxm"):
        for m in ("msg", "tagged"):
            if "med.%s.rdm.%s" % (c, m) in series:
                cols.append(("med.%s.rdm.%s" % (c, m), "%s %s" % (LABELS[c + ".rdm"], m)))
    g.append(lat_table(series, cols, [("med.rsverbs.msg", "med.perftest.send", "rsverbs ÷ ib_send_lat"),
                                      ("med.rsverbs.msg", "med.verbs.msg", "rsverbs ÷ libfabric verbs"),
                                      ("med.rsverbs_before.msg", "med.verbs.msg", "before ÷ libfabric verbs"),
                                      ("med.rsverbs.rdm.msg", "med.verbs_rxm.rdm.msg", "native ÷ verbs;ofi_rxm (msg)"),
                                      ("med.rsverbs.rdm.tagged", "med.verbs_rxm.rdm.tagged",
                                       "native ÷ verbs;ofi_rxm (tagged)"),
                                      ("med.rsverbs_before.rdm.msg", "med.verbs_rxm.rdm.msg",
                                       "before ÷ verbs;ofi_rxm (msg)")], POW2))
    g.append("")
    g.append("### Latency minima (µs, half round trip: fastest round trip of each run, fi_bw -m lat; "
             "median over rounds)")
    g.append("")
    g.append("The least disturbed figure on a shared machine: what each stack costs when nothing else runs.")
    g.append("")
    g.append(lat_table(series, [(c[0].replace("med.", "low.", 1), c[1]) for c in cols],
                       [(a.replace("med.", "low.", 1), b.replace("med.", "low.", 1), t) for a, b, t in
                        [("med.rsverbs.msg", "med.perftest.send", "rsverbs ÷ ib_send_lat"),
                         ("med.rsverbs.msg", "med.verbs.msg", "rsverbs ÷ libfabric verbs"),
                         ("med.rsverbs_before.msg", "med.verbs.msg", "before ÷ libfabric verbs"),
                         ("med.rsverbs.rdm.msg", "med.verbs_rxm.rdm.msg", "native ÷ verbs;ofi_rxm (msg)"),
                         ("med.rsverbs.rdm.tagged", "med.verbs_rxm.rdm.tagged", "native ÷ verbs;ofi_rxm (tagged)"),
                         ("med.rsverbs_before.rdm.msg", "med.verbs_rxm.rdm.msg", "before ÷ verbs;ofi_rxm (msg)")]],
                       POW2))
    g.append("")
    for op in ("send", "write", "read"):
        g.append("### Bandwidth, %s (MB/s = 10^6 B/s, median of rounds)" % op)
        g.append("")
        cols = [("bw.perftest.%s" % op, "ib_%s_bw" % op)]
        for c in ("rsverbs.msg", "rsverbs_before.msg", "verbs.msg", "rsverbs.rdm", "rsverbs_before.rdm", "verbs_rxm.rdm",
                  "rsverbs_rxm.rdm", "tcp_rxm.rdm"):
            cols.append(("bw.%s.%s" % (c, op), LABELS[c]))
        g.append(lat_table(series, cols, [("bw.rsverbs.msg.%s" % op, "bw.perftest.%s" % op, "rsverbs MSG ÷ perftest"),
                                          ("bw.rsverbs.msg.%s" % op, "bw.verbs.msg.%s" % op, "rsverbs MSG ÷ libfabric"),
                                          ("bw.rsverbs.rdm.%s" % op, "bw.verbs_rxm.rdm.%s" % op,
                                           "rsverbs RDM ÷ verbs;ofi_rxm")],
                           [8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20]))
        g.append("")
    if any(k.startswith("b2:bw.") for k in series):
        g.append("### Second boot: bandwidth against perftest (MB/s)")
        g.append("")
        for op in ("send", "write", "read"):
            g.append("%s:" % op)
            g.append("")
            g.append(lat_table(series, [("b2:bw.perftest.%s" % op, "ib_%s_bw" % op),
                                        ("b2:bw.rsverbs.msg.%s" % op, LABELS["rsverbs.msg"]),
                                        ("b2:bw.verbs.msg.%s" % op, LABELS["verbs.msg"])],
                               [("b2:bw.rsverbs.msg.%s" % op, "b2:bw.perftest.%s" % op, "rsverbs ÷ perftest"),
                                ("b2:bw.rsverbs.msg.%s" % op, "b2:bw.verbs.msg.%s" % op, "rsverbs ÷ libfabric")],
                               [8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20]))
            g.append("")
    g.append("### Message rate at 8 B (Mmsg/s, median of rounds)")
    g.append("")
    rows = []
    for c in ("perftest",) + tuple(k for k in LABELS if k != "perftest"):
        row = [LABELS[c]]
        for op in ("send", "write", "read"):
            row.append(fmt(med(series, "rate.%s.%s" % (c, op), 8), 4))
        rows.append(row)
    g.append(table(["contender", "send", "write", "read"], rows))
    g.append("")
    g.append("### Scale: one RDM endpoint with N connected peers")
    g.append("")
    g.append(scale_table(scale))
    g.append("")
    g.append("RSS/VmPin/VmLck of the server process (`/proc/self/status`), before the peers are inserted and after "
             "every peer has exchanged a message with it (so every connection exists); latency: ping-pong "
             "round-robin over the N peers, half round trip.")
    g.append("")
    failed = [r for r in runs if r["rc"] != 0 or r["values"] == 0]
    g.append("### Runs that failed or gave no figures")
    g.append("")
    if failed:
        g.append(table(["run", "round", "rc", "last output (client | server)"],
                       [[r["id"], str(r["round"]), str(r["rc"]), "`%s`" % r.get("error", "").replace("|", "/")]
                        for r in failed]))
    else:
        g.append("None.")
    g.append("")
    if made:
        g.append("### Plots")
        g.append("")
        mddir = os.path.dirname(os.path.abspath(a.md)) if a.md else os.getcwd()
        for p in made:
            g.append("![%s](%s)" % (os.path.basename(p), os.path.relpath(p, mddir)))
        g.append("")
    if a.compare:
        try:
            with open(a.compare) as fh:
                old = json.load(fh)
            g.append("### Compared with %s (%s)" % (a.compare, old.get("meta", {}).get("date", "?")))
            g.append("")
            g.append(compare(series, old))
            g.append("")
        except (OSError, ValueError) as e:
            g.append("(compare with %s failed: %s)" % (a.compare, e))
    gen = "\n".join(g)

    if a.md:
        text = read(a.md)
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN) + len(BEGIN)] + "\n" + gen + "\n" + text[text.index(END):]
        else:
            text = text + "\n" + BEGIN + "\n" + gen + "\n" + END + "\n"
        with open(a.md, "w") as fh:
            fh.write(text)
    print(gen)
    for t in tg:
        for est, r in t["results"].items():
            print("TARGET %-7s %-4s %s %s" % (r["status"], est, fmt(r["ratio"], 3) if r["ratio"] is not None else "-",
                                               t["target"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
