//! Load and save of a generated `client_state.xml` with 20 projects and 10,000 tasks, through
//! the daemon's crash-safe store. Prints, per operation (median of several runs):
//! - tokenize: the XML parser alone over the text (events, no values kept);
//! - convert: text to the domain model (`ClientState::parse`, one pass) minus tokenize;
//! - load: read the file and parse it, as at start-up;
//! - serialize: domain model to text;
//! - save: serialize, write `client_state_next.xml`, fsync, rotate, rename, fsync the directory.
//!
//! Targets: load under 100 ms, save under 50 ms. Run: `cargo bench -p ferrite-daemon`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ferrite_daemon::store::StateStore;
use ferrite_proto::client_state::{synthetic, ClientState};
use quick_xml::events::Event;
use quick_xml::Reader;

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn time(n: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm up
    median(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let state = synthetic(20, 10_000);
    let xml = state.to_xml();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = StateStore::new(dir.path());
    store.save(&xml).expect("first save");
    println!(
        "client_state.xml: {} projects, {} tasks, {:.1} MB",
        state.projects.len(),
        state.results().count(),
        xml.len() as f64 / 1e6
    );

    let tokenize = time(15, || {
        let mut r = Reader::from_str(&xml);
        let mut n = 0usize;
        loop {
            match r.read_event() {
                Ok(Event::Eof) | Err(_) => break,
                Ok(_) => n += 1,
            }
        }
        black_box(n);
    });
    let parse = time(15, || {
        let p = ClientState::parse(black_box(&xml), "client_state.xml").expect("parses");
        black_box(p.value.projects.len());
    });
    let load = time(15, || {
        let loaded = store.load(ClientState::parse);
        black_box(loaded.value.map(|p| p.value.projects.len()));
    });
    let serialize = time(15, || {
        black_box(state.to_xml().len());
    });
    let save = time(15, || {
        store.save(&state.to_xml()).expect("save");
    });
    println!("tokenize   {:7.1} ms", ms(tokenize));
    println!("convert    {:7.1} ms", ms(parse.saturating_sub(tokenize)));
    println!(
        "parse      {:7.1} ms (tokenize + convert, one pass)",
        ms(parse)
    );
    println!(
        "load       {:7.1} ms (read file + parse; target < 100 ms)",
        ms(load)
    );
    println!(
        "serialize  {:7.1} ms (what a save costs the main loop: ferrited's writer thread \
         does the rest)",
        ms(serialize)
    );
    println!(
        "save       {:7.1} ms (serialize + write + fsync + rotate; target < 50 ms)",
        ms(save)
    );
}
