//! `burn MS`: spins until this process has used MS milliseconds of CPU (its
//! `CLOCK_PROCESS_CPUTIME_ID`), then exits 0. A known amount of work for the receipt's usage (H4).

fn cpu_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

fn main() {
    let target: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .expect("usage: burn MS");
    let mut x = 0u64;
    while cpu_ms() < target {
        for i in 0..100_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
}
