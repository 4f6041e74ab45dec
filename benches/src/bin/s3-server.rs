//! A real S3 server (s3s-fs) over a folder on 127.0.0.1, for the object
//! storage benchmarks (`benches/packs.py`): prints its endpoint on the
//! first line, serves until stdin closes. Credentials: `adapt-test` /
//! `adapt-test-secret`.

use std::io::Read;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(root), bucket) = (args.next(), args.next()) else {
        eprintln!("usage: s3-server ROOT [BUCKET]");
        std::process::exit(2);
    };
    let bucket = bucket.unwrap_or_else(|| "bench".into());
    let server = adapt_remote::testing::S3Server::start(std::path::Path::new(&root), &bucket)?;
    println!("{}", server.endpoint());
    // Serve until the parent closes our stdin.
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    Ok(())
}
