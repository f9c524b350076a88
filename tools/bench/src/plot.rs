//! `tt-bench plot RUN.json OUTDIR`: what a run measured, as SVG figures
//! (the `plotters` crate), run on the host after `make bench`. Each
//! figure puts every mechanism side by side: this driver's, tt-kmd's (when
//! the run had it, dashed), flock, OFD locks and the robust mutex:
//! - `contended-empty.svg`, `contended-50us.svg`: throughput and fairness
//!   against the number of processes, and the distribution of single
//!   waits at 2, 8 and 32 processes (the share of acquisitions that waited
//!   at least so long, log-log: the tail is where starvation shows);
//! - `mixed-50us.svg`: the same for pollers and blocking waiters on one
//!   lock, a line per group (the pollers' in a lighter shade);
//! - `smc.svg`: SMC_MSG messages per second, fairness and round trips
//!   against the number of files posting.

use std::fs;
use std::path::Path;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use serde_json::Value;

use crate::stats::Hist;

/// One measured point of a line: at x processes (or files).
struct Point {
    x: f64,
    per_sec: f64,
    fairness: f64,
    /// (value in µs, share of the samples at least that large).
    tail: Vec<(f64, f64)>,
}

/// One line in every panel of a figure.
struct Line {
    label: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<Point>,
}

type Res<T> = Result<T, String>;

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The tail of a `{hist: [[lo, count], ...], max}` object, in µs.
fn tail(h: &Value) -> Vec<(f64, f64)> {
    let pairs: Vec<(u64, u64)> = h["hist"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p.get(0)?.as_u64()?, p.get(1)?.as_u64()?)))
                .collect()
        })
        .unwrap_or_default();
    let hist = Hist::from_pairs(pairs, h["max"].as_u64().unwrap_or(0));
    let mut t: Vec<(f64, f64)> = hist
        .tail()
        .into_iter()
        .map(|(v, f)| ((v as f64 / 1e3).max(0.01), f))
        .collect();
    // The last step ends at the exact maximum.
    if hist.n > 0 {
        t.push(((hist.max as f64 / 1e3).max(0.01), 1.0 / hist.n as f64));
    }
    t
}

/// `{ "P": {per_sec, fairness, <wait>: hist}, ... }` as points.
fn points(per_x: &Value, wait_key: &str) -> Vec<Point> {
    let mut v: Vec<Point> = per_x
        .as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(x, e)| {
                    Some(Point {
                        x: x.parse().ok()?,
                        per_sec: num(&e["per_sec"]),
                        fairness: num(&e["fairness"]),
                        tail: tail(&e[wait_key]),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.x.total_cmp(&b.x));
    v
}

/// A colour per line name, the same in every figure.
fn color(name: &str) -> RGBColor {
    match name {
        "acquire" | "smc_wait" => RGBColor(31, 119, 180),
        "lock_ctl" => RGBColor(44, 160, 44),
        "poll_1ms" => RGBColor(255, 127, 14),
        "flock" => RGBColor(20, 20, 20),
        "ofd" => RGBColor(140, 140, 140),
        "robust_mutex" => RGBColor(148, 103, 189),
        "tt-kmd lock_ctl" => RGBColor(214, 39, 40),
        "tt-kmd poll_1ms" => RGBColor(188, 140, 30),
        _ => RGBColor(23, 190, 207),
    }
}

fn ttkmd_name(run: &Value) -> Option<String> {
    let k = run.get("ttkmd").filter(|k| !k.is_null())?;
    Some(match k["version"].as_str() {
        Some(v) if !v.is_empty() => format!("tt-kmd {v}"),
        _ => "tt-kmd".into(),
    })
}

/// The lines of a contention section (`busy_50us`, `empty_cs`).
fn contention_lines(run: &Value, key: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    if let Some(o) = run[key].as_object() {
        for (m, per_p) in o {
            lines.push(Line {
                label: format!("this driver: {m}"),
                color: color(m),
                dashed: false,
                points: points(per_p, "wait_ns"),
            });
        }
    }
    if let (Some(name), Some(o)) = (ttkmd_name(run), run["ttkmd"][key].as_object()) {
        for (m, per_p) in o.iter().filter(|(m, _)| *m != "flock") {
            lines.push(Line {
                label: format!("{name}: {m}"),
                color: color(&format!("tt-kmd {m}")),
                dashed: true,
                points: points(per_p, "wait_ns"),
            });
        }
    }
    // flock, OFD and the mutex are no driver's: say so.
    for l in &mut lines {
        for m in ["flock", "ofd", "robust_mutex"] {
            if l.label == format!("this driver: {m}") {
                l.label = m.to_string();
            }
        }
    }
    lines
}

/// The lines of the mixed section: one per kind and group.
fn mixed_lines(run: &Value) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut add = |prefix: &str, kind: &str, per_p: &Value, dashed: bool, ckey: String| {
        for (group, what) in [("pollers", "tries every 1 ms"), ("blockers", "blocking")] {
            let per_g: serde_json::Map<String, Value> = per_p
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(p, e)| (p.clone(), e[group].clone()))
                        .collect()
                })
                .unwrap_or_default();
            let mut c = color(&ckey);
            if group == "pollers" {
                // A lighter shade of the kind's colour.
                c = RGBColor(c.0 / 2 + 110, c.1 / 2 + 110, c.2 / 2 + 110);
            }
            lines.push(Line {
                label: format!("{prefix}{kind}: {group} ({what})"),
                color: c,
                dashed,
                points: points(&Value::Object(per_g), "wait_ns"),
            });
        }
    };
    if let Some(o) = run["mixed_50us"].as_object() {
        for (k, per_p) in o {
            let prefix = if k == "flock" { "" } else { "this driver: " };
            add(prefix, k, per_p, false, k.clone());
        }
    }
    if let (Some(name), Some(o)) = (ttkmd_name(run), run["ttkmd"]["mixed_50us"].as_object()) {
        for (k, per_p) in o.iter().filter(|(k, _)| *k != "flock") {
            add(&format!("{name}: "), k, per_p, true, format!("tt-kmd {k}"));
        }
    }
    lines
}

fn smc_lines(run: &Value) -> Vec<Line> {
    let mut lines = Vec::new();
    if let Some(o) = run["smc_msg"]["patterns"].as_object() {
        for (p, per_n) in o {
            lines.push(Line {
                label: format!("this driver: {p}"),
                color: color(p),
                dashed: false,
                points: points(per_n, "round_trip_ns"),
            });
        }
    }
    if let (Some(name), Some(o)) = (
        ttkmd_name(run),
        run["ttkmd"]["smc_msg"]["patterns"].as_object(),
    ) {
        for (p, per_n) in o {
            lines.push(Line {
                label: format!("{name}: {p}"),
                color: color(&format!("tt-kmd {p}")),
                dashed: true,
                points: points(per_n, "round_trip_ns"),
            });
        }
    }
    lines
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Draws `points` as `line` draws (solid or dashed), labelled once.
fn draw_line<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    line: &Line,
    pts: Vec<(f64, f64)>,
    markers: bool,
) -> Res<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let style = line.color.stroke_width(2);
    let c = line.color;
    if line.dashed {
        chart
            .draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))
            .map_err(err)?
            .label(line.label.clone())
            .legend(move |(x, y)| {
                DashedPathElement::new(vec![(x, y), (x + 24, y)], 6, 4, c.stroke_width(2))
            });
    } else {
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(err)?
            .label(line.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], c.stroke_width(2)));
    }
    if markers {
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
            .map_err(err)?;
    }
    Ok(())
}

fn finite_range(v: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    v.filter(|x| x.is_finite() && *x > 0.0)
        .fold(None, |acc, x| match acc {
            None => Some((x, x)),
            Some((lo, hi)) => Some((f64::min(lo, x), f64::max(hi, x))),
        })
}

/// One figure: a title; on top throughput and fairness against x; below,
/// the distribution of the waits at each x (at most three).
fn figure(
    path: &Path,
    title: &str,
    x_desc: &str,
    rate_desc: &str,
    wait_desc: &str,
    lines: &[Line],
) -> Res<()> {
    let xs: Vec<f64> = {
        let mut v: Vec<f64> = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.x))
            .collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    if xs.is_empty() {
        return Err(format!("{title}: nothing measured"));
    }
    let root = SVGBackend::new(path, (1500, 1000)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 24)).map_err(err)?;
    let (top, bottom) = root.split_vertically(480);
    let top_panels = top.split_evenly((1, 2));
    // Processes (files) on a log2 axis, whose ticks fall on powers of two.
    let x_range = (xs[0].log2() - 0.5)..(xs[xs.len() - 1].log2() + 0.5);
    let x_fmt = |x: &f64| {
        if (x - x.round()).abs() < 1e-9 {
            format!("{}", 2f64.powf(x.round()))
        } else {
            String::new()
        }
    };

    // Throughput.
    let (lo, hi) = finite_range(
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.per_sec)),
    )
    .unwrap_or((1.0, 10.0));
    let mut chart = ChartBuilder::on(&top_panels[0])
        .caption(rate_desc, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_range.clone(), (lo / 2.0..hi * 2.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("{x_desc} (log)"))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|y| crate::report::fmt_rate(*y))
        .draw()
        .map_err(err)?;
    for l in lines {
        let pts = l
            .points
            .iter()
            .map(|p| (p.x.log2(), p.per_sec))
            .filter(|p| p.1 > 0.0)
            .collect();
        draw_line(&mut chart, l, pts, true)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;

    // Fairness.
    let mut chart = ChartBuilder::on(&top_panels[1])
        .caption("fairness: min/max per process over 1 s", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x_range, 0.0..1.05)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("{x_desc} (log)"))
        .x_label_formatter(&x_fmt)
        .draw()
        .map_err(err)?;
    for l in lines {
        let pts = l
            .points
            .iter()
            .map(|p| (p.x.log2(), p.fairness))
            .filter(|p| p.1.is_finite())
            .collect();
        draw_line(&mut chart, l, pts, true)?;
    }

    // The waits.
    let shown: Vec<f64> = xs.iter().rev().take(3).rev().copied().collect();
    let panels = bottom.split_evenly((1, shown.len()));
    let (wlo, whi) = finite_range(
        lines
            .iter()
            .flat_map(|l| l.points.iter().flat_map(|p| p.tail.iter().map(|t| t.0))),
    )
    .unwrap_or((1.0, 1000.0));
    let flo = lines
        .iter()
        .flat_map(|l| l.points.iter().flat_map(|p| p.tail.iter().map(|t| t.1)))
        .fold(1.0f64, f64::min)
        .max(1e-7);
    for (panel, x) in panels.iter().zip(&shown) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                // "1 file", "8 files".
                format!(
                    "{wait_desc}, {x:.0} {}",
                    if *x == 1.0 {
                        x_desc.trim_end_matches('s')
                    } else {
                        x_desc
                    }
                ),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (wlo / 1.5..whi * 1.5).log_scale(),
                (flo / 2.0..1.2).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("µs (log)")
            .y_desc("share at least that long")
            .x_label_formatter(&|v| {
                if *v >= 1.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            })
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .draw()
            .map_err(err)?;
        for l in lines {
            if let Some(p) = l.points.iter().find(|p| p.x == *x) {
                // Steps: each bucket's share holds until the next bucket.
                let mut pts = Vec::with_capacity(2 * p.tail.len());
                for (i, &(v, f)) in p.tail.iter().enumerate() {
                    if i > 0 {
                        pts.push((v, p.tail[i - 1].1));
                    }
                    pts.push((v, f));
                }
                if !pts.is_empty() {
                    draw_line(&mut chart, l, pts, false)?;
                }
            }
        }
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Draws every figure `run` (a run's JSON) has data for into `dir`;
/// returns the files written.
pub fn plot(run: &Value, dir: &Path) -> Res<Vec<String>> {
    let setup = &run["setup"];
    let when = format!(
        "{}, {}",
        setup["date"].as_str().unwrap_or("?"),
        setup["kernel"].as_str().unwrap_or("?")
    );
    let mut written = Vec::new();
    let mut out =
        |name: &str, title: String, x: &str, rate: &str, wait: &str, lines: Vec<Line>| -> Res<()> {
            if lines.iter().all(|l| l.points.is_empty()) {
                return Ok(());
            }
            let path = dir.join(name);
            figure(&path, &title, x, rate, wait, &lines)?;
            written.push(path.display().to_string());
            Ok(())
        };
    out(
        "contended-empty.svg",
        format!("One lock, an empty critical section ({when})"),
        "processes",
        "acquisitions per second",
        "single waits",
        contention_lines(run, "empty_cs"),
    )?;
    out(
        "contended-50us.svg",
        format!("One lock, each holder busy 50 µs ({when})"),
        "processes",
        "acquisitions per second",
        "single waits",
        contention_lines(run, "busy_50us"),
    )?;
    out(
        "mixed-50us.svg",
        format!("Pollers (every 1 ms) and blocking waiters on one lock, 50 µs held ({when})"),
        "processes",
        "acquisitions per second, per group",
        "single waits",
        mixed_lines(run),
    )?;
    out(
        "smc.svg",
        format!(
            "SMC_MSG round trips, TEST message, {} ({when})",
            run["smc_msg"]["device"].as_str().unwrap_or("?")
        ),
        "files",
        "messages per second",
        "round trips",
        smc_lines(run),
    )?;
    if written.is_empty() {
        return Err("the run has no contention nor SMC_MSG figures".into());
    }
    Ok(written)
}

/// [`plot`] of the JSON file `json` into the directory `dir`.
pub fn plot_file(json: &str, dir: &str) -> Res<Vec<String>> {
    let text = fs::read_to_string(json).map_err(|e| format!("{json}: {e}"))?;
    let run: Value = serde_json::from_str(&text).map_err(|e| format!("{json}: {e}"))?;
    fs::create_dir_all(dir).map_err(|e| format!("{dir}: {e}"))?;
    plot(&run, Path::new(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::tests::{sample, with_ttkmd};

    fn run_json(with_kmd: bool) -> Value {
        let r = if with_kmd {
            with_ttkmd(sample(1.0), sample(0.5))
        } else {
            sample(1.0)
        };
        serde_json::from_str(&r.json()).unwrap()
    }

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("tt-bench-plot-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn every_figure_with_every_mechanism() {
        let dir = tmpdir("all");
        let files = plot(&run_json(true), &dir).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| {
                Path::new(f)
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "contended-empty.svg",
                "contended-50us.svg",
                "mixed-50us.svg",
                "smc.svg"
            ]
        );
        let svg = |n: &str| fs::read_to_string(dir.join(n)).unwrap();
        let c = svg("contended-50us.svg");
        assert!(c.starts_with("<svg"));
        for label in [
            "this driver: acquire",
            "this driver: lock_ctl",
            "this driver: poll_1ms",
            "tt-kmd 2.10.1-pre: lock_ctl",
            "tt-kmd 2.10.1-pre: poll_1ms",
            "flock",
            "single waits, 32 processes",
            "fairness: min/max per process over 1 s",
        ] {
            assert!(c.contains(label), "{label} not in contended-50us.svg");
        }
        assert!(!c.contains("tt-kmd 2.10.1-pre: flock"));
        let m = svg("mixed-50us.svg");
        for label in [
            "this driver: lock_ctl: pollers (tries every 1 ms)",
            "this driver: lock_ctl: blockers (blocking)",
            "tt-kmd 2.10.1-pre: lock_ctl: pollers (tries every 1 ms)",
            "flock: blockers (blocking)",
        ] {
            assert!(m.contains(label), "{label} not in mixed-50us.svg");
        }
        let s = svg("smc.svg");
        for label in [
            "this driver: smc_wait",
            "tt-kmd 2.10.1-pre: poll_1ms",
            "round trips, 32 files",
            "round trips, 1 file",
            "/dev/tenstorrent/1",
        ] {
            assert!(s.contains(label), "{label} not in smc.svg");
        }
        assert!(!s.contains("1 files"));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn without_ttkmd_and_without_data() {
        let dir = tmpdir("alone");
        plot(&run_json(false), &dir).unwrap();
        let c = fs::read_to_string(dir.join("contended-empty.svg")).unwrap();
        assert!(c.contains("this driver: acquire") && !c.contains("tt-kmd"));
        // A run with none of these sections draws nothing and says so.
        let empty = serde_json::json!({"setup": {}, "busy_50us": {}});
        assert!(plot(&empty, &dir).is_err());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn tails_fall_from_one_to_one_sample() {
        let h = serde_json::json!({"hist": [[1024, 2], [2048, 1], [4096, 1]], "max": 4100});
        let t = tail(&h);
        assert_eq!(t, [(1.024, 1.0), (2.048, 0.5), (4.096, 0.25), (4.1, 0.25)]);
        assert!(t.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 >= w[1].1));
    }
}
