//! Shared by the examples: `--place cpu|gpu|gpu:N` on the command line.
#![allow(dead_code)]

use dygraph::{Place, Result};

/// The place named by `--place`, else the default place (a hardware GPU if present, else the
/// CPU; `DYGRAPH_DEVICE` overrides).
pub fn place_from_args() -> Result<Place> {
    let args: Vec<String> = std::env::args().collect();
    for (i, a) in args.iter().enumerate() {
        let value =
            if a == "--place" { args.get(i + 1).cloned() } else { a.strip_prefix("--place=").map(str::to_string) };
        if let Some(v) = value {
            let place: Place = v.parse()?;
            dygraph::set_place(place)?;
            return Ok(place);
        }
    }
    dygraph::current_place()
}

/// A flag's value: `--name value` or `--name=value`.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let flag = format!("--{name}");
    args.iter().enumerate().find_map(|(i, a)| {
        if *a == flag { args.get(i + 1).cloned() } else { a.strip_prefix(&format!("{flag}=")).map(str::to_string) }
    })
}
