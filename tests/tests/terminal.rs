//! `run` in the foreground of a terminal (SPEC W15): the workload's process group is the
//! terminal's foreground group while it runs, so the terminal's Ctrl-C, Ctrl-Z and Ctrl-\ reach
//! the whole job as they would the bare command, and the terminal comes back afterwards (also
//! when `run` is killed).
//!
//! Each case drives a real job-control shell (`bash -i`, in a session of its own whose
//! controlling terminal is a pseudo-terminal this test opened) by typing into the terminal's
//! master, as an operator would, and reads what the terminal shows.

use refine_tests::cli_support;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, Command};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use cli_support::*;
use refine_supervisor::kernel::procfs;
use refine_tests::{bin, wait_until};

/// The outer shell's prompt, and the one of a shell started under `run`.
const PROMPT: &str = "OUTER> ";
const INNER: &str = "INNER> ";

/// A job-control shell on a new pseudo-terminal, and everything the terminal showed.
struct Shell {
    master: File,
    shown: Arc<(Mutex<Vec<u8>>, Condvar)>,
    child: Child,
    /// How far [`Shell::expect`] has read.
    seen: usize,
}

impl Shell {
    fn start(home: &Home) -> Shell {
        let (master, slave) = refine_tests::open_pty();
        // `setsid --ctty`: a session of its own, with this terminal as its controlling
        // terminal, as a terminal emulator starts a login shell.
        let child = Command::new("setsid")
            .args(words("--ctty bash --norc --noprofile --noediting -i"))
            .env("PS1", PROMPT)
            .env("TERM", "dumb")
            .env("HISTFILE", "/dev/null")
            .env("REFINE_HOME", home.path())
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .expect("spawn setsid bash");
        let mut reader = File::from(master.try_clone().expect("dup the master"));
        let shown = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let sink = shown.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                sink.0.lock().unwrap().extend_from_slice(&buf[..n]);
                sink.1.notify_all();
            }
        });
        let mut sh = Shell {
            master: File::from(master),
            shown,
            child,
            seen: 0,
        };
        sh.expect(PROMPT);
        sh
    }

    fn type_(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).expect("type");
    }

    /// Types `run FLAGS -- STARTS_THEN_SLEEPS` and waits until its workload printed `start`.
    fn start_sleeper(&mut self, flags: &str) {
        self.type_(&run_line(flags, STARTS_THEN_SLEEPS));
        self.expect("start");
    }

    /// Waits until the terminal shows `what` past what was already matched.
    fn expect(&mut self, what: &str) {
        let (lock, cond) = &*self.shown;
        let end = Instant::now() + DEADLINE;
        let mut shown = lock.lock().unwrap();
        loop {
            if let Some(at) = find(&shown[self.seen..], what.as_bytes()) {
                self.seen += at + what.len();
                return;
            }
            let left = end.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the terminal never showed {what:?}; it showed:\n{}",
                String::from_utf8_lossy(&shown)
            );
            shown = cond.wait_timeout(shown, left).unwrap().0;
        }
    }

    /// Everything the terminal showed.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.shown.0.lock().unwrap()).into_owned()
    }

    /// The terminal's foreground process group.
    fn foreground(&self) -> i32 {
        rustix::termios::tcgetpgrp(self.master.as_fd())
            .map(|p| p.as_raw_nonzero().get())
            .unwrap_or(-1)
    }

    /// Waits until a `sleep` runs in the terminal's foreground group. The workloads print
    /// `start` before `sh` forks their `sleep`, and a key's signal that lands between the fork
    /// and the exec is taken by `sh`'s handler in the child and lost (the bare command has the
    /// same window): a key is typed only once the `sleep` is there.
    fn wait_for_sleep(&self) {
        assert!(
            wait_until(DEADLINE, || sleep_in(self.foreground(), None)),
            "no sleep ever ran in the foreground group {}:\n{}",
            self.foreground(),
            self.screen()
        );
    }

    fn shell_pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// `run`, started by this shell: a process of the shell's session running the supervisor.
    fn find_run(&self) -> Option<procfs::Stat> {
        procfs::all_pids().ok()?.into_iter().find_map(|pid| {
            let st = procfs::stat(pid).ok()?;
            (st.sid == self.shell_pid()
                && st.pid.as_raw_nonzero().get() != self.shell_pid()
                && st.comm.as_bytes().starts_with(b"refine-supervis"))
            .then_some(st)
        })
    }
}

impl Drop for Shell {
    /// Ends what the shell started too (its session: `run` among them, whose scope then ends,
    /// W16), so that a failed case leaves nothing behind.
    fn drop(&mut self) {
        let session: Vec<_> = procfs::all_pids()
            .unwrap_or_default()
            .into_iter()
            .filter(|&p| procfs::stat(p).is_ok_and(|st| st.sid == self.shell_pid()))
            .collect();
        for pid in session {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a `sleep` is in process group `pgid` (in `state`, when one is given).
fn sleep_in(pgid: i32, state: Option<procfs::State>) -> bool {
    procfs::all_pids().unwrap().into_iter().any(|pid| {
        procfs::stat(pid).is_ok_and(|st| {
            st.pgid == pgid && st.comm.as_bytes() == b"sleep" && state.is_none_or(|s| st.state == s)
        })
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The command line that starts `run` in the shell (the workload's words as the shell reads
/// them). The workload's own `start` is printed as `sta` `rt` so the typed echo cannot match.
fn run_line(flags: &str, workload: &str) -> String {
    format!(
        "{} run {flags} -- {workload}\n",
        bin("refine-supervisor").display()
    )
}

const STARTS_THEN_SLEEPS: &str = r#"sh -c 'printf "%s%s\n" sta rt; sleep 100'"#;

/// Ctrl-C on `run -- sh -c '...; sleep 100'` ends it at once with 130, as for the bare command:
/// the terminal's SIGINT reaches the shell and its `sleep` together (the grace, 3 s here, would
/// otherwise run out and end it with 137).
#[test]
fn ctrl_c_reaches_the_whole_job_and_run_exits_130() {
    let home = Home::new();
    let mut sh = Shell::start(&home);
    sh.start_sleeper("--stop-grace 3s");
    sh.wait_for_sleep();
    let t0 = Instant::now();
    sh.type_("\x03");
    sh.expect(PROMPT);
    println!("Ctrl-C to the prompt: {:?}", t0.elapsed());
    sh.type_("echo \"r\"\"c=$?\"\n");
    sh.expect("rc=");
    sh.expect("\n");
    let screen = sh.screen();
    assert!(
        screen.contains("rc=130"),
        "Ctrl-C did not end the job with 130:\n{screen}"
    );
    assert_eq!(
        sh.foreground(),
        sh.shell_pid(),
        "the shell has the terminal back"
    );
}

/// Ctrl-Z stops the whole job and gives the shell its prompt; `fg` continues it in the
/// foreground (Ctrl-C then ends it with 130).
#[test]
fn ctrl_z_stops_the_job_and_fg_gives_it_the_terminal_again() {
    let home = Home::new();
    let mut sh = Shell::start(&home);
    sh.start_sleeper("--stop-grace 3s");
    let run = sh.find_run().expect("run in the shell's session");
    let run_pgid = run.pgid;
    assert!(
        wait_until(DEADLINE, || {
            let fg = sh.foreground();
            fg != run_pgid && fg != sh.shell_pid()
        }),
        "the workload's group never got the terminal (foreground {}, run's group {run_pgid}):\n{}",
        sh.foreground(),
        sh.screen()
    );
    let workload = sh.foreground();
    sh.wait_for_sleep();
    sh.type_("\x1a");
    sh.expect("Stopped");
    sh.expect(PROMPT);
    assert!(
        wait_until(DEADLINE, || sleep_in(
            workload,
            Some(procfs::State::Stopped)
        )),
        "the job's sleep is not stopped"
    );
    sh.type_("fg\n");
    assert!(
        wait_until(DEADLINE, || sh.foreground() == workload),
        "fg did not give the workload the terminal again (foreground {}):\n{}",
        sh.foreground(),
        sh.screen()
    );
    sh.type_("\x03");
    sh.expect(PROMPT);
    sh.type_("echo \"r\"\"c=$?\"\n");
    sh.expect("rc=");
    sh.expect("\n");
    let screen = sh.screen();
    assert!(screen.contains("rc=130"), "{screen}");
}

/// `bash -i` under `run` gets job control: it owns the terminal, and Ctrl-Z stops its own job
/// (its `jobs` line, not the outer shell's `run` one).
#[test]
fn a_shell_under_run_gets_job_control() {
    let home = Home::new();
    let mut sh = Shell::start(&home);
    // The prompt split in two, so that the typed echo of the line cannot match it.
    let inner = "env PS1='INN''ER> ' bash --norc --noprofile --noediting -i";
    sh.type_(&run_line("", inner));
    sh.expect(INNER);
    sh.type_(r#"sh -c 'printf "%s%s\n" sta rt; exec sleep 100'"#);
    sh.type_("\n");
    sh.expect("start");
    sh.wait_for_sleep();
    sh.type_("\x1a");
    sh.expect("Stopped");
    sh.expect(INNER);
    // `fg`, not `wait`: bash may not have seen the SIGKILL yet, and `wait` returns at once on a
    // job it still thinks stopped (then `exit` refuses: "There are stopped jobs").
    sh.type_("kill -9 %1; fg %1; exit 5\n");
    sh.expect(PROMPT);
    sh.type_("echo \"r\"\"c=$?\"\n");
    sh.expect("rc=");
    sh.expect("\n");
    let screen = sh.screen();
    assert!(
        !screen.contains("no job control"),
        "the inner shell had no job control:\n{screen}"
    );
    assert!(screen.contains("rc=5"), "{screen}");
    assert_eq!(sh.foreground(), sh.shell_pid());
}

/// `run` killed with SIGKILL cannot give the terminal back itself: the shell takes it back when
/// its job ends (as every job-control shell does), and the scope ends with it (W16).
#[test]
fn the_shell_gets_the_terminal_back_when_run_is_killed() {
    let home = Home::new();
    let mut sh = Shell::start(&home);
    sh.start_sleeper("");
    let run = sh.find_run().expect("run in the shell's session");
    assert!(
        wait_until(DEADLINE, || {
            let fg = sh.foreground();
            fg != run.pgid && fg != sh.shell_pid()
        }),
        "the workload's group never got the terminal:\n{}",
        sh.screen()
    );
    rustix::process::kill_process(run.pid, rustix::process::Signal::KILL).expect("kill run");
    sh.expect(PROMPT);
    sh.type_("echo \"r\"\"c=$?\"\n");
    sh.expect("rc=");
    sh.expect("\n");
    let screen = sh.screen();
    assert!(screen.contains("rc=137"), "{screen}");
    assert_eq!(sh.foreground(), sh.shell_pid(), "{screen}");
}
