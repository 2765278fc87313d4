//! `serve --metrics ADDR` (SPEC F2): the exposition passes Debian's `promtool check metrics`, its
//! counters and gauges follow real launches, stops and a corrupted receipt, and a real Prometheus
//! server on loopback scrapes the service and answers a query for the launch counter.
//!
//! `promtool` and `prometheus` come from Debian's `prometheus` package (`.ci/run` installs it);
//! where it cannot be had the tests that need it print a skip reason.

use refine_tests::cli_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cli_support::*;
use refine_tests::wait_until;

/// A loopback address with a port that was free a moment ago.
fn free_loopback() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr")
}

/// `GET path` over HTTP/1.1 with `Connection: close`: (status line, body).
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    Ok((status, body.to_owned()))
}

/// The value of the sample `series` (name and labels exactly as exposed) in `exposition`.
fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        let (name, value) = l.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

/// Where a Debian `prometheus` package tool is, if it is installed.
fn tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A running `serve --metrics`; SIGKILLed and reaped on drop.
struct Served {
    child: Child,
    metrics: SocketAddr,
}

impl Served {
    fn start(home: &Home) -> Served {
        Served::start_with(home, |_| {})
    }

    /// [`Served::start`] with the service's command adjusted first (its environment).
    fn start_with(home: &Home, adjust: impl FnOnce(&mut Command)) -> Served {
        let metrics = free_loopback();
        let mut command = home.command(&["serve", "--metrics", &metrics.to_string()]);
        adjust(&mut command);
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let mut served = Served { child, metrics };
        let sock = home.run_dir().join("supervisor.sock");
        let up = wait_until(DEADLINE, || {
            std::os::unix::net::UnixStream::connect(&sock).is_ok()
                && served.scrape_status().is_some_and(|s| s.contains(" 200 "))
        });
        if !up {
            let status = served.child.try_wait();
            let log = std::fs::read_to_string(home.run_dir().join("service.log"));
            panic!("serve --metrics {metrics} did not come up ({status:?}): {log:?}");
        }
        served
    }

    fn scrape_status(&self) -> Option<String> {
        http_get(self.metrics, "/metrics").ok().map(|(s, _)| s)
    }

    fn scrape(&self) -> String {
        let (status, body) = http_get(self.metrics, "/metrics").expect("scrape /metrics");
        assert!(status.contains(" 200 "), "GET /metrics: {status}\n{body}");
        body
    }

    /// Scrapes until `series` reads `value`; panics with the last exposition otherwise.
    fn wait_for(&self, series: &str, value: f64) -> String {
        let mut last = String::new();
        let seen = wait_until(DEADLINE, || {
            last = self.scrape();
            sample(&last, series) == Some(value)
        });
        assert!(seen, "{series} never read {value}; last scrape:\n{last}");
        last
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `run --detach OPTS... -- ARGV...` through the service: the registration id.
fn detach(home: &Home, opts: &[&str], argv: &[&str]) -> String {
    let id = detach_with(home, opts, argv);
    assert_eq!(id.len(), 32, "run --detach prints the id: {id:?}");
    id
}

/// `promtool check metrics` on `exposition`: (success, its output).
fn promtool_check(promtool: &Path, exposition: &str) -> (bool, String) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    child
        .stdin
        .take()
        .expect("promtool stdin")
        .write_all(exposition.as_bytes())
        .expect("feed promtool");
    let out = child.wait_with_output().expect("wait promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && text.trim().is_empty(), text)
}

#[test]
fn exposition_follows_launches_stops_and_receipt_failures() {
    let home = Home::new();
    let served = Served::start(&home);

    // A launch that completes, and one whose completion deadline the engine enforces.
    let done = detach(&home, &[], &["true"]);
    served.wait_for("refine_launches_total{outcome=\"completed\"}", 1.0);
    detach(
        &home,
        &["--timeout", "1s", "--kill-after", "0"],
        &["sleep", "600"],
    );
    let live = detach(&home, &[], &["sleep", "600"]);
    // H6: a scope whose probe never succeeds is `starting` in the readiness gauge.
    let starting = detach(
        &home,
        &["--ready", "cmd=false", "--ready-timeout", "0"],
        &["sleep", "600"],
    );
    let text = served.wait_for("refine_launches_total{outcome=\"timed_out\"}", 1.0);
    assert_eq!(
        sample(
            &text,
            "refine_stop_duration_seconds_count{cause=\"timed_out\"}"
        ),
        Some(1.0),
        "the engine's own stop is observed:\n{text}"
    );
    assert_eq!(
        sample(&text, "refine_launch_requests_total{result=\"started\"}"),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "refine_scopes_ready{state=\"starting\"}"),
        Some(1.0),
        "{text}"
    );
    home.cli(&["stop", &starting]);
    let text = served.wait_for("refine_scopes{kind=\"command\",state=\"live\"}", 1.0);
    assert_eq!(
        sample(&text, "refine_scopes_unverified"),
        Some(0.0),
        "{text}"
    );
    for gauge in [
        "refine_capacity_slots",
        "refine_capacity_free",
        "refine_scopes_stalled",
        "refine_scopes_silent",
    ] {
        assert!(sample(&text, gauge).is_some(), "{gauge} missing:\n{text}");
    }

    // A receipt that no longer decodes: the scope turns unverified and is counted once.
    home.make_unverified(&done);
    // It was proven exited and left the open index, which the census reads (F1); `gc` re-indexes
    // a record that is no longer exited.
    let gc = home.json(&["gc", "--json"]);
    assert_eq!(gc["reindexed"][0], done.as_str(), "{gc}");
    let text = served.wait_for("refine_scopes_unverified", 1.0);
    assert_eq!(
        sample(
            &text,
            "refine_receipt_failures_total{reason=\"receipt_corrupt\"}"
        ),
        Some(1.0),
        "{text}"
    );
    let again = served.scrape();
    assert_eq!(
        sample(
            &again,
            "refine_receipt_failures_total{reason=\"receipt_corrupt\"}"
        ),
        Some(1.0),
        "a scope is counted once, not once per scrape:\n{again}"
    );

    // Only GET /metrics is served.
    let (status, _) = http_get(served.metrics, "/other").expect("GET /other");
    assert!(status.contains(" 404 "), "{status}");

    match tool("promtool") {
        Some(promtool) => {
            let (ok, out) = promtool_check(&promtool, &again);
            assert!(ok, "promtool check metrics:\n{out}\non:\n{again}");
        }
        None => eprintln!(
            "skipped: promtool check metrics (no promtool: install Debian's `prometheus` package)"
        ),
    }
    let out = home.cli(&["stop", &live]);
    assert!(out.status.success(), "{}", describe(&["stop", &live], &out));
}

#[test]
fn a_metrics_address_in_use_is_one_line() {
    let home = Home::new();
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let args = ["serve", "--metrics", &addr];
    let out = home.cli(&args);
    assert!(!out.status.success(), "{}", describe(&args, &out));
    let line = assert_one_line_error(&args, &out);
    assert!(line.contains(&addr), "{line}");
}

/// A Prometheus server on loopback with its own config and storage; SIGKILLed and reaped on drop.
struct Prometheus {
    child: Child,
    web: SocketAddr,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(exe: &Path, target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: refine\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write prometheus.yml");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log");
        let web = free_loopback();
        let child = Command::new(exe)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        Prometheus { child, web, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The instant query's first sample value, if the query answers with one.
    fn query(&self, promql: &str) -> Option<String> {
        let encoded: String = promql
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (status, body) = http_get(self.web, &format!("/api/v1/query?query={encoded}")).ok()?;
        if !status.contains(" 200 ") {
            return None;
        }
        let doc: serde_json::Value = serde_json::from_str(&body).ok()?;
        doc["data"]["result"][0]["value"][1]
            .as_str()
            .map(str::to_owned)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_prometheus_scrapes_the_launch_counter() {
    let Some(exe) = tool("prometheus") else {
        eprintln!("skipped: no prometheus server (install Debian's `prometheus` package)");
        return;
    };
    let home = Home::new();
    let served = Served::start(&home);
    let prom = Prometheus::start(&exe, served.metrics);

    detach(&home, &[], &["true"]);
    served.wait_for("refine_launches_total{outcome=\"completed\"}", 1.0);

    let query = "refine_launches_total{job=\"refine\",outcome=\"completed\"}";
    let mut last = None;
    // Prometheus takes a few seconds to start, then scrapes every second.
    let seen = wait_until(Duration::from_secs(120), || {
        last = prom.query(query);
        last.as_deref() == Some("1")
    });
    assert!(
        seen,
        "Prometheus never answered {query} with 1 (last: {last:?}); its log:\n{}",
        prom.log()
    );
    assert_eq!(
        prom.query("up{job=\"refine\"}").as_deref(),
        Some("1"),
        "the scrape target is up"
    );
    // F4: where the scope had a cgroup of its own (not in CI's REFINE_CGROUP=off run), its
    // CPU time is a series Prometheus stores too.
    if served.scrape().contains("refine_scope_cpu_seconds_total{") {
        let query = "refine_scope_cpu_seconds_total{job=\"refine\",kind=\"command\"}";
        let seen = wait_until(Duration::from_secs(60), || prom.query(query).is_some());
        assert!(seen, "Prometheus has no {query}; its log:\n{}", prom.log());
    }
}

/// A raw HTTP/1.1 exchange (`Connection: close`): the whole response, head and body.
fn http_raw(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

/// Every series is there at the first scrape, before any event, at zero; the build is named.
#[test]
fn every_series_is_exposed_from_the_start_and_the_build_is_named() {
    let home = Home::new();
    let served = Served::start(&home);
    let text = served.scrape();
    // V1: the service's build, as `version --json` names it (its own provenance), and the
    // guardian's it launches.
    let version = home.json(&["version", "--json"]);
    for (metric, p) in [
        ("refine_build_info", &version["supervisor"]),
        (
            "refine_guardian_build_info",
            &version["guardian"]["provenance"],
        ),
    ] {
        let word = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => "unknown".to_owned(),
        };
        let build = format!(
            "{metric}{{class=\"{}\",commit=\"{}\",dirty=\"{}\",version=\"{}\"}}",
            word(&p["class"]),
            word(&p["commit"]),
            word(&p["dirty"]),
            word(&p["version"]),
        );
        assert_eq!(sample(&text, &build), Some(1.0), "{build}:\n{text}");
    }
    let mut missing = Vec::new();
    let mut want = |series: String| {
        if sample(&text, &series) != Some(0.0) {
            missing.push(series);
        }
    };
    for result in ["started", "no_capacity", "rejected", "failed"] {
        want(format!(
            "refine_launch_requests_total{{result=\"{result}\"}}"
        ));
    }
    for outcome in [
        "completed",
        "timed_out",
        "idle_timeout",
        "cancelled",
        "output_limit",
        "spawn_failed",
        "capture_fault",
        "stopped",
        "guardian_lost",
    ] {
        want(format!("refine_launches_total{{outcome=\"{outcome}\"}}"));
    }
    for cause in [
        "operator",
        "completion_deadline",
        "idle_deadline",
        "timed_out",
        "cancelled",
    ] {
        want(format!(
            "refine_stop_duration_seconds_count{{cause=\"{cause}\"}}"
        ));
        want(format!("refine_stop_failures_total{{cause=\"{cause}\"}}"));
    }
    want("refine_stop_failures_total{cause=\"residue\"}".to_owned());
    for reason in [
        "receipt_corrupt",
        "proof_missing",
        "guardian_gone_without_receipt",
    ] {
        want(format!(
            "refine_receipt_failures_total{{reason=\"{reason}\"}}"
        ));
    }
    for kind in ["agent", "quality", "command", "terminal"] {
        want(format!(
            "refine_tree_max_rss_bytes_count{{kind=\"{kind}\"}}"
        ));
        for mode in ["user", "system"] {
            want(format!(
                "refine_tree_cpu_seconds_total{{kind=\"{kind}\",mode=\"{mode}\"}}"
            ));
        }
        for state in ["live", "unverified"] {
            want(format!(
                "refine_scopes{{kind=\"{kind}\",state=\"{state}\"}}"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "not exposed at 0 from the start: {missing:?}\n{text}"
    );
    if let Some(promtool) = tool("promtool") {
        let (ok, out) = promtool_check(&promtool, &text);
        assert!(ok, "promtool check metrics:\n{out}\non:\n{text}");
    }
}

/// `/metrics?query` is `/metrics`; `HEAD` answers the head alone; other methods are 405 with
/// `Allow`, other paths 404.
#[test]
fn query_strings_and_head_are_served() {
    let home = Home::new();
    let served = Served::start(&home);
    let (status, body) = http_get(served.metrics, "/metrics?x=1").expect("GET /metrics?x=1");
    assert!(status.contains(" 200 "), "{status}\n{body}");
    assert!(body.contains("refine_launches_total"), "{body}");

    let head = http_raw(
        served.metrics,
        "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let (top, rest) = head.split_once("\r\n\r\n").unwrap_or((&head, ""));
    assert!(top.starts_with("HTTP/1.1 200"), "{head}");
    assert!(rest.is_empty(), "HEAD has no body: {head}");
    assert!(
        top.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );

    let post = http_raw(
        served.metrics,
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    assert!(
        post.to_ascii_lowercase().contains("allow: get, head"),
        "{post}"
    );
    let (status, _) = http_get(served.metrics, "/metricsx").expect("GET /metricsx");
    assert!(status.contains(" 404 "), "{status}");
    // Not HTTP at all: an error answer or a closed connection, and the next scrape still works.
    let junk = http_raw(served.metrics, "\x00\x01 nonsense\r\n\r\n");
    assert!(
        junk.is_empty() || junk.starts_with("HTTP/1.1 400"),
        "{junk}"
    );
    served.scrape();
}

/// A stop from the command line of a launch the service made is counted as the service's
/// launch outcome `stopped`.
#[test]
fn a_cli_stop_of_a_service_launch_is_counted() {
    let home = Home::new();
    let served = Served::start(&home);
    let id = detach(&home, &[], &["sleep", "600"]);
    home.wait_state(&id, "live");
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop", &id], &out));
    served.wait_for("refine_launches_total{outcome=\"stopped\"}", 1.0);
}

/// Burns about 200 ms of CPU holding a 32 MiB string it wrote.
const BURN: &str = "my $x = 'x' x 33554432; my $e = (times)[0] + 0.2; 1 while (times)[0] < $e;";

/// F4: where the scopes get cgroups of their own, the exposition carries their accounting at
/// their end; on the `/proc` path those series are absent, not 0.
#[test]
fn the_scopes_cgroup_accounting_is_exported_where_present_and_absent_otherwise() {
    use refine_supervisor::kernel::cgroup::{self, Setting};
    cgroup::configure(Setting::Auto);
    let base = match cgroup::base() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("skipped: no writable cgroup v2 ({why})");
            return;
        }
    };
    if !Path::new("/usr/bin/perl").exists() {
        eprintln!("skipped: no /usr/bin/perl for the workload");
        return;
    }
    let memory = std::fs::read_to_string(base.join("cgroup.subtree_control"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
    let home = Home::new();
    let served = Served::start_with(&home, |c| {
        c.env_remove("REFINE_CGROUP");
    });
    detach(&home, &[], &["/usr/bin/perl", "-e", BURN]);
    let text = served.wait_for("refine_launches_total{outcome=\"completed\"}", 1.0);
    let cpu = sample(&text, "refine_scope_cpu_seconds_total{kind=\"command\"}");
    assert!(
        cpu.is_some_and(|s| s >= 0.1),
        "about 200 ms of CPU:\n{text}"
    );
    let peak = sample(
        &text,
        "refine_scope_memory_peak_bytes_count{kind=\"command\"}",
    );
    let oom = sample(&text, "refine_scope_oom_kills_total{kind=\"command\"}");
    if memory {
        assert_eq!(peak, Some(1.0), "{text}");
        assert_eq!(oom, Some(0.0), "{text}");
    } else {
        assert!(
            !text.contains("refine_scope_memory_peak_bytes") && oom.is_none(),
            "no memory controller: the series are absent:\n{text}"
        );
    }
    if let Some(promtool) = tool("promtool") {
        let (ok, out) = promtool_check(&promtool, &text);
        assert!(ok, "promtool check metrics:\n{out}\non:\n{text}");
    }
    drop(served);
    // The /proc path: no cgroup, no accounting series.
    let home = Home::new();
    let served = Served::start_with(&home, |c| {
        c.env("REFINE_CGROUP", "off");
    });
    detach(&home, &[], &["true"]);
    let text = served.wait_for("refine_launches_total{outcome=\"completed\"}", 1.0);
    assert!(
        !text.contains("refine_scope_"),
        "absent on the /proc path, not 0:\n{text}"
    );
}

/// The shipped alerting rules (V3), beside the unit.
fn rules_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .join("scripts")
}

/// `promtool ARGS` in `dir`: (success, stdout and stderr).
fn promtool_in(promtool: &Path, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(promtool)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("spawn promtool");
    let text = format!(
        "promtool {args:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// V3: the rules load (`promtool check rules`) and pass their unit tests (`promtool test
/// rules`). Negative control: the same tests fail on a copy whose unverified alert forgets to
/// wait its `for:` (so the tests do look at what the rules say).
#[test]
fn the_shipped_alert_rules_pass_their_promtool_tests() {
    let Some(promtool) = tool("promtool") else {
        eprintln!(
            "skipped: promtool test rules (no promtool: install Debian's `prometheus` package)"
        );
        return;
    };
    let dir = rules_dir();
    let (ok, out) = promtool_in(
        &promtool,
        &dir,
        &["check", "rules", "refine-supervisor.rules.yml"],
    );
    assert!(ok, "{out}");
    let (ok, out) = promtool_in(
        &promtool,
        &dir,
        &["test", "rules", "refine-supervisor.rules.test.yml"],
    );
    assert!(ok, "{out}");

    let copy = tempfile::tempdir().expect("tempdir");
    let rules = std::fs::read_to_string(dir.join("refine-supervisor.rules.yml")).expect("rules");
    let hasty = rules.replacen("        for: 5m\n", "        for: 0m\n", 1);
    assert_ne!(hasty, rules, "the unverified alert waits 5m");
    std::fs::write(copy.path().join("refine-supervisor.rules.yml"), hasty).unwrap();
    std::fs::copy(
        dir.join("refine-supervisor.rules.test.yml"),
        copy.path().join("refine-supervisor.rules.test.yml"),
    )
    .unwrap();
    let (ok, out) = promtool_in(
        &promtool,
        copy.path(),
        &["test", "rules", "refine-supervisor.rules.test.yml"],
    );
    assert!(!ok, "the tests pass on rules that fire too early:\n{out}");
}

/// V3: every `refine_*` series the rules read is one the service exports from its first scrape,
/// with the label values the rules select.
#[test]
fn the_alert_rules_read_only_series_the_service_exports() {
    let rules = std::fs::read_to_string(rules_dir().join("refine-supervisor.rules.yml"))
        .expect("the shipped rules");
    let expressions: String = rules
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut names: Vec<&str> = expressions
        .match_indices("refine_")
        .map(|(at, _)| {
            let rest = &expressions[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|n| !n.starts_with("refine_supervisor"))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(names.len() >= 5, "{names:?}");

    let home = Home::new();
    let served = Served::start(&home);
    let text = served.scrape();
    for name in &names {
        let exported = text
            .lines()
            .any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")));
        assert!(
            exported,
            "the rules read {name}, which the service does not export:\n{text}"
        );
    }
    for series in [
        "refine_launch_requests_total{result=\"no_capacity\"}",
        "refine_stop_duration_seconds_bucket{cause=\"operator\",le=\"2.5\"}",
        "refine_stop_failures_total{cause=\"residue\"}",
    ] {
        assert_eq!(sample(&text, series), Some(0.0), "{series}:\n{text}");
    }
}
