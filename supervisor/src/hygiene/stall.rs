//! The stall watch's state machine (SPEC H3): pure policy, fed samples, no clock and no `/proc`
//! of its own (the service samples; tests inject the times).
//!
//! Every sample period the service feeds one [`Sample`] per live scope: a monotonic time, the
//! tree's cumulative CPU time, and the bytes the scope produced (its artifacts' size plus what
//! its members wrote, also past the log cap, see [`sample`]). Between two samples
//! the tree's CPU use is `ΔCPU / Δt`, in cores.
//!
//! ```text
//! stalled  the last N samples (default 5) averaged >= the threshold (default 0.75 core), none of
//!          them calm (< half the threshold), and nothing was produced meanwhile. A calm sample or
//!          a write starts the count again; a busy sample a little under the threshold does not
//!          (a pegged process on a loaded machine dips now and then), it only lowers the average.
//! silent   nothing written for M samples in a row (default 30) while the scope is alive.
//! late     a sample more than three periods after the previous one (suspend, a stopped service)
//!          restarts every count and clears what was signalled: nothing is known of the gap.
//! ```
//!
//! [`Watch::observe`] returns an [`Event`] when an incident begins and when it clears, so the
//! service logs each incident once and its end once; [`Watch::status`] is what `ps` and `show`
//! print. The watch never signals anything.
//!
//! # Caveats
//! A tree's CPU time is the sum over its live members plus what reaped members left in their
//! reapers' child counters; a member that exits between samples and is reaped by a process
//! outside the sample makes the sum drop: a negative difference counts as zero. Output that goes
//! somewhere other than the scope's artifacts (a file the workload writes itself) is not seen:
//! such a scope may be reported `silent` while it works, or `stalled` while it computes.

pub mod sample;

use std::collections::VecDeque;
use std::time::Duration;

/// Defaults (all are `serve` flags).
pub(crate) const DEFAULT_PERIOD: Duration = Duration::from_secs(60);
pub(crate) const DEFAULT_THRESHOLD: f64 = 0.75;
pub const DEFAULT_STALLED_SAMPLES: u32 = 5;
pub const DEFAULT_SILENT_SAMPLES: u32 = 30;

/// The watch's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StallConfig {
    /// The sample period.
    pub period: Duration,
    /// CPU threshold in cores (0.75: 75 % of one core).
    pub threshold: f64,
    /// N: samples in a row for `stalled` (0: the signal is off).
    pub stalled_samples: u32,
    /// M: samples without a write for `silent` (0: the signal is off).
    pub silent_samples: u32,
}

impl Default for StallConfig {
    fn default() -> Self {
        StallConfig {
            period: DEFAULT_PERIOD,
            threshold: DEFAULT_THRESHOLD,
            stalled_samples: DEFAULT_STALLED_SAMPLES,
            silent_samples: DEFAULT_SILENT_SAMPLES,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StallConfigError {
    #[error("the sample period must be longer than zero")]
    ZeroPeriod,
    #[error("the CPU threshold must be a positive number of cores, not {0}")]
    Threshold(f64),
}

impl StallConfig {
    pub fn validate(self) -> Result<StallConfig, StallConfigError> {
        if self.period.is_zero() {
            return Err(StallConfigError::ZeroPeriod);
        }
        if !(self.threshold.is_finite() && self.threshold > 0.0) {
            return Err(StallConfigError::Threshold(self.threshold));
        }
        Ok(self)
    }
}

/// One observation of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Monotonic time (any fixed origin): the watch computes rates and lateness from it.
    pub at: Duration,
    /// Wall clock, for display only (an incident's "since").
    pub unix_ms: u64,
    /// The tree's cumulative CPU time (user + system).
    pub cpu: Duration,
    /// Bytes the scope produced: its artifacts' size plus what its live members wrote
    /// ([`sample`]); only a change matters (a member's exit may make it drop).
    pub produced_bytes: u64,
}

pub use refine_protocol::record::{StallIncident as Incident, StallSignal as Signal};

/// `stalled` or `silent`.
pub fn signal_name(signal: Signal) -> &'static str {
    match signal {
        Signal::Stalled => "stalled",
        Signal::Silent => "silent",
    }
}

/// Why an incident ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleared {
    /// The scope produced output.
    Wrote,
    /// A calm sample (under half the threshold).
    Calm,
    /// Busy, but the average of the last N samples fell under the threshold.
    BelowThreshold,
    /// A sample came more than three periods late: every count restarted.
    LateSample,
}

/// `wrote`, `calm`, `below_threshold`, `late_sample`.
pub fn cleared_name(reason: Cleared) -> &'static str {
    match reason {
        Cleared::Wrote => "wrote",
        Cleared::Calm => "calm",
        Cleared::BelowThreshold => "below_threshold",
        Cleared::LateSample => "late_sample",
    }
}

/// What a sample changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    Began(Incident),
    Ended { incident: Incident, reason: Cleared },
}

/// The open incidents of one scope (what `ps` and `show` print).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    pub stalled: Option<Incident>,
    pub silent: Option<Incident>,
}

impl Status {
    /// `stalled`, `silent`, `stalled+silent`, or `None`.
    pub fn label(&self) -> Option<&'static str> {
        match (self.stalled.is_some(), self.silent.is_some()) {
            (true, true) => Some("stalled+silent"),
            (true, false) => Some("stalled"),
            (false, true) => Some("silent"),
            (false, false) => None,
        }
    }
}

/// The watch over one scope.
#[derive(Debug, Clone)]
pub struct Watch {
    cfg: StallConfig,
    last: Option<Sample>,
    /// CPU (cores) of the busy samples since the last calm sample or write, newest last, at
    /// most N.
    busy: VecDeque<f64>,
    /// Busy samples in a row (not capped).
    busy_run: u32,
    /// Samples in a row without a write.
    quiet: u32,
    last_write_unix_ms: u64,
    status: Status,
    samples: u64,
}

impl Watch {
    pub fn new(cfg: StallConfig) -> Watch {
        Watch {
            cfg,
            last: None,
            busy: VecDeque::new(),
            busy_run: 0,
            quiet: 0,
            last_write_unix_ms: 0,
            status: Status::default(),
            samples: 0,
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn config(&self) -> StallConfig {
        self.cfg
    }

    /// Samples observed so far (the first is the baseline).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Feeds one sample; returns the incidents that began or ended with it (in that order:
    /// ended first). A sample not later than the previous one is ignored.
    pub fn observe(&mut self, s: Sample) -> Vec<Event> {
        let mut events = Vec::new();
        self.samples += 1;
        let Some(prev) = self.last else {
            self.last = Some(s);
            self.last_write_unix_ms = s.unix_ms;
            return events;
        };
        let Some(dt) = s.at.checked_sub(prev.at).filter(|d| !d.is_zero()) else {
            return events;
        };
        self.last = Some(s);
        if dt > self.cfg.period.saturating_mul(3) {
            self.busy.clear();
            self.busy_run = 0;
            self.quiet = 0;
            self.end(Signal::Stalled, Cleared::LateSample, &mut events);
            self.end(Signal::Silent, Cleared::LateSample, &mut events);
            return events;
        }
        let cores = s.cpu.saturating_sub(prev.cpu).as_secs_f64() / dt.as_secs_f64();
        let wrote = s.produced_bytes != prev.produced_bytes;
        let calm = cores < self.cfg.threshold / 2.0;
        if wrote {
            self.quiet = 0;
            self.last_write_unix_ms = s.unix_ms;
        } else {
            self.quiet = self.quiet.saturating_add(1);
        }
        if wrote || calm {
            self.busy.clear();
            self.busy_run = 0;
        } else {
            self.busy.push_back(cores);
            self.busy_run = self.busy_run.saturating_add(1);
            while self.busy.len() > self.cfg.stalled_samples as usize {
                self.busy.pop_front();
            }
        }
        let n = self.cfg.stalled_samples;
        let average = if self.busy.is_empty() {
            cores
        } else {
            self.busy.iter().sum::<f64>() / self.busy.len() as f64
        };
        let cpu_permille = (average * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32;

        // stalled
        let stalled = n > 0 && self.busy.len() == n as usize && average >= self.cfg.threshold;
        if stalled {
            let figures = Incident {
                signal: Signal::Stalled,
                since_unix_ms: s.unix_ms,
                samples: self.busy_run,
                cpu_permille,
                last_write_unix_ms: self.last_write_unix_ms,
            };
            self.begin_or_update(figures, &mut events);
        } else {
            let reason = if wrote {
                Cleared::Wrote
            } else if calm {
                Cleared::Calm
            } else {
                Cleared::BelowThreshold
            };
            self.end(Signal::Stalled, reason, &mut events);
        }

        // silent
        let m = self.cfg.silent_samples;
        if m > 0 && self.quiet >= m {
            let figures = Incident {
                signal: Signal::Silent,
                since_unix_ms: s.unix_ms,
                samples: self.quiet,
                cpu_permille,
                last_write_unix_ms: self.last_write_unix_ms,
            };
            self.begin_or_update(figures, &mut events);
        } else {
            self.end(Signal::Silent, Cleared::Wrote, &mut events);
        }
        events
    }

    fn slot(&mut self, signal: Signal) -> &mut Option<Incident> {
        match signal {
            Signal::Stalled => &mut self.status.stalled,
            Signal::Silent => &mut self.status.silent,
        }
    }

    fn begin_or_update(&mut self, figures: Incident, events: &mut Vec<Event>) {
        let slot = self.slot(figures.signal);
        match slot {
            Some(open) => {
                // The same incident: keep when it began, refresh the figures.
                *open = Incident {
                    since_unix_ms: open.since_unix_ms,
                    ..figures
                };
            }
            None => {
                *slot = Some(figures);
                events.push(Event::Began(figures));
            }
        }
    }

    fn end(&mut self, signal: Signal, reason: Cleared, events: &mut Vec<Event>) {
        if let Some(incident) = self.slot(signal).take() {
            events.push(Event::Ended { incident, reason });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(60);

    /// Drives a watch with samples one period apart.
    struct Feed {
        watch: Watch,
        at: Duration,
        cpu: Duration,
        bytes: u64,
    }

    impl Feed {
        fn new(cfg: StallConfig) -> Feed {
            let mut f = Feed {
                watch: Watch::new(cfg),
                at: Duration::from_secs(1000),
                cpu: Duration::ZERO,
                bytes: 0,
            };
            assert!(f.push().is_empty(), "the first sample is a baseline");
            f
        }

        fn push(&mut self) -> Vec<Event> {
            self.watch.observe(Sample {
                at: self.at,
                unix_ms: refine_protocol::time::saturating_ms(self.at),
                cpu: self.cpu,
                produced_bytes: self.bytes,
            })
        }

        /// One period later, the tree used `cores` on average, and wrote `bytes`.
        fn step(&mut self, cores: f64, bytes: u64) -> Vec<Event> {
            self.step_after(PERIOD, cores, bytes)
        }

        fn step_after(&mut self, dt: Duration, cores: f64, bytes: u64) -> Vec<Event> {
            self.at += dt;
            self.cpu += dt.mul_f64(cores);
            self.bytes += bytes;
            self.push()
        }

        fn status(&self) -> Status {
            self.watch.status()
        }
    }

    fn began(events: &[Event], signal: Signal) -> bool {
        events
            .iter()
            .any(|e| matches!(e, Event::Began(i) if i.signal == signal))
    }

    fn ended(events: &[Event], signal: Signal) -> Option<Cleared> {
        events.iter().find_map(|e| match e {
            Event::Ended { incident, reason } if incident.signal == signal => Some(*reason),
            _ => None,
        })
    }

    fn cfg() -> StallConfig {
        StallConfig {
            period: PERIOD,
            ..StallConfig::default()
        }
    }

    #[test]
    fn five_busy_samples_without_a_write_are_a_stall_told_once() {
        let mut f = Feed::new(cfg());
        for i in 1..5 {
            assert!(f.step(1.0, 0).is_empty(), "sample {i}: not yet");
            assert_eq!(f.status().stalled, None);
        }
        let ev = f.step(1.0, 0);
        assert!(began(&ev, Signal::Stalled), "{ev:?}");
        let open = f.status().stalled.unwrap();
        assert_eq!(open.samples, 5);
        assert_eq!(open.cpu_permille, 1000);
        assert_eq!(f.status().label(), Some("stalled"));
        // Told once: further busy samples update the figures, no new event.
        for _ in 0..10 {
            assert!(f.step(0.9, 0).is_empty());
        }
        let later = f.status().stalled.unwrap();
        assert_eq!(later.since_unix_ms, open.since_unix_ms);
        assert_eq!(later.samples, 15);
        assert_eq!(later.cpu_permille, 900);
    }

    #[test]
    fn a_write_or_a_calm_sample_restarts_the_count_and_clears() {
        let mut f = Feed::new(cfg());
        for _ in 0..4 {
            f.step(1.0, 0);
        }
        assert!(f.step(1.0, 10).is_empty(), "a write restarts the count");
        for _ in 0..4 {
            assert!(f.step(1.0, 0).is_empty());
        }
        assert!(began(&f.step(1.0, 0), Signal::Stalled));
        assert_eq!(
            ended(&f.step(1.0, 1), Signal::Stalled),
            Some(Cleared::Wrote)
        );
        for _ in 0..5 {
            f.step(1.0, 0);
        }
        assert!(f.status().stalled.is_some());
        // Calm: under half the threshold (0.375 core).
        assert_eq!(ended(&f.step(0.3, 0), Signal::Stalled), Some(Cleared::Calm));
        for _ in 0..4 {
            assert!(
                f.step(1.0, 0).is_empty(),
                "the calm sample restarted the count"
            );
        }
    }

    #[test]
    fn a_dip_under_the_threshold_does_not_restart_the_count() {
        let mut f = Feed::new(cfg());
        // 1.0, 0.5 (busy but under 0.75, not calm), 1.0, 1.0, 1.0: average 0.9.
        for cores in [1.0, 0.5, 1.0, 1.0] {
            assert!(f.step(cores, 0).is_empty());
        }
        assert!(began(&f.step(1.0, 0), Signal::Stalled));
        // Averages that fall below the threshold without a calm sample clear it.
        for _ in 0..2 {
            f.step(0.5, 0);
        }
        let ev = f.step(0.5, 0);
        assert_eq!(ended(&ev, Signal::Stalled), Some(Cleared::BelowThreshold));
    }

    #[test]
    fn under_the_threshold_on_average_is_never_a_stall() {
        let mut f = Feed::new(cfg());
        for _ in 0..50 {
            assert!(f.status().stalled.is_none());
            let ev = f.step(0.7, 0);
            assert!(!began(&ev, Signal::Stalled), "{ev:?}");
        }
    }

    #[test]
    fn silence_for_m_samples_while_calm_or_busy() {
        let mut f = Feed::new(StallConfig {
            silent_samples: 3,
            stalled_samples: 0,
            ..cfg()
        });
        assert!(f.step(0.0, 0).is_empty());
        assert!(f.step(0.0, 0).is_empty());
        let ev = f.step(0.0, 0);
        assert!(began(&ev, Signal::Silent), "{ev:?}");
        assert_eq!(f.status().silent.unwrap().samples, 3);
        assert!(f.step(2.0, 0).is_empty(), "stalled is off (N = 0)");
        assert_eq!(f.status().silent.unwrap().samples, 4);
        assert_eq!(ended(&f.step(0.0, 5), Signal::Silent), Some(Cleared::Wrote));
        assert_eq!(f.status(), Status::default());
    }

    #[test]
    fn default_silence_is_thirty_samples() {
        let mut f = Feed::new(cfg());
        for _ in 0..29 {
            assert!(f.step(0.0, 0).is_empty());
        }
        assert!(began(&f.step(0.0, 0), Signal::Silent));
    }

    #[test]
    fn a_late_sample_restarts_every_count_and_clears() {
        let mut f = Feed::new(StallConfig {
            silent_samples: 6,
            ..cfg()
        });
        for _ in 0..6 {
            f.step(1.0, 0);
        }
        assert_eq!(f.status().label(), Some("stalled+silent"));
        // Three periods is still on time; more than three is late.
        assert!(f.step_after(PERIOD * 3, 1.0, 0).is_empty());
        let ev = f.step_after(PERIOD * 3 + Duration::from_secs(1), 1.0, 0);
        assert_eq!(ended(&ev, Signal::Stalled), Some(Cleared::LateSample));
        assert_eq!(ended(&ev, Signal::Silent), Some(Cleared::LateSample));
        assert_eq!(f.status(), Status::default());
        for _ in 0..4 {
            assert!(f.step(1.0, 0).is_empty(), "counts start again from zero");
        }
        assert!(began(&f.step(1.0, 0), Signal::Stalled));
    }

    #[test]
    fn stalled_and_silent_are_independent_incidents() {
        let mut f = Feed::new(StallConfig {
            silent_samples: 7,
            ..cfg()
        });
        for _ in 0..5 {
            f.step(1.0, 0);
        }
        assert_eq!(f.status().label(), Some("stalled"));
        f.step(1.0, 0);
        let ev = f.step(1.0, 0);
        assert!(began(&ev, Signal::Silent) && !began(&ev, Signal::Stalled));
        // Calm ends the stall but not the silence.
        let ev = f.step(0.0, 0);
        assert_eq!(ended(&ev, Signal::Stalled), Some(Cleared::Calm));
        assert_eq!(ended(&ev, Signal::Silent), None);
        assert_eq!(f.status().label(), Some("silent"));
    }

    #[test]
    fn samples_out_of_order_and_cpu_that_drops_are_harmless() {
        let mut f = Feed::new(cfg());
        f.at -= Duration::from_secs(1);
        assert!(f.push().is_empty(), "an earlier sample is ignored");
        f.at += Duration::from_secs(1);
        assert!(f.push().is_empty(), "a sample at the same time is ignored");
        // The tree's CPU sum drops (a member reaped elsewhere): zero, i.e. calm.
        f.cpu = Duration::ZERO;
        assert!(f.step(0.0, 0).is_empty());
        for _ in 0..4 {
            f.step(1.0, 0);
        }
        f.at += PERIOD;
        f.cpu = f.cpu.saturating_sub(Duration::from_secs(100));
        let ev = f.push();
        assert_eq!(ended(&ev, Signal::Stalled), None, "{ev:?}");
        assert!(f.status().stalled.is_none());
    }

    #[test]
    fn config_is_checked() {
        assert!(StallConfig::default().validate().is_ok());
        let zero = StallConfig {
            period: Duration::ZERO,
            ..cfg()
        };
        assert_eq!(zero.validate(), Err(StallConfigError::ZeroPeriod));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let c = StallConfig {
                threshold: bad,
                ..cfg()
            };
            assert!(c.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn rates_use_the_real_interval() {
        // Half-period samples at 1 core are still 1 core.
        let mut f = Feed::new(cfg());
        for _ in 0..4 {
            assert!(f.step_after(PERIOD / 2, 1.0, 0).is_empty());
        }
        let ev = f.step_after(PERIOD / 2, 1.0, 0);
        assert!(began(&ev, Signal::Stalled));
        assert_eq!(f.status().stalled.unwrap().cpu_permille, 1000);
    }
}
