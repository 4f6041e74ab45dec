//! A real HTTP file server (tower-http's `ServeDir`: Range, HEAD) over a
//! folder on 127.0.0.1, for the benchmarks of data read over HTTP
//! (`benches/sharded_read.py --http-server`): prints its URL on the first
//! line, serves until stdin closes.

use std::io::Read;

fn main() -> std::io::Result<()> {
    let Some(root) = std::env::args().nth(1) else {
        eprintln!("usage: http-server ROOT");
        std::process::exit(2);
    };
    let server = adapt_remote::testing::HttpServer::start(std::path::Path::new(&root))?;
    println!("{}", server.url());
    // Serve until the parent closes our stdin.
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    Ok(())
}
