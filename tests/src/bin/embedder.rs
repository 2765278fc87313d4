//! A Rust host as an embedder writes it: the library alone, the guardian found as the facade
//! finds it (nothing set). `embedder HOME`: launches `true`, prints its outcome; on an error
//! prints the error's one line and exits 1.

use refine_supervisor::{Command, Supervisor};

fn main() {
    let Some(home) = std::env::args_os().nth(1) else {
        eprintln!("usage: embedder HOME");
        std::process::exit(2);
    };
    let run = || -> Result<String, Box<dyn std::error::Error>> {
        let sup = Supervisor::open(&home)?;
        let result = sup.spawn(Command::new("true"))?.wait()?;
        Ok(format!("{:?}", result.outcome).to_lowercase())
    };
    match run() {
        Ok(outcome) => println!("{outcome}"),
        Err(e) => {
            eprintln!("embedder: {}", refine_supervisor::error_chain(e.as_ref()));
            std::process::exit(1);
        }
    }
}
