//! Not a verb: serve's stdio. The flags of the pipes it was given, one socket for stdin and
//! stdout, and replies that fill its widened stdout pipe.

use super::{details, read_reply, seed_closed_threads, world, write_list, SCRIPT};
use serde_json::Value;

/// serve reads and writes its pipes non-blocking (see `src/serve/stdio.rs`, `src/serve/output.rs`), which
/// changes the open file descriptions it shares with whoever gave it the pipes; it puts the
/// flags back on exit.
#[test]
fn serve_puts_back_the_flags_of_the_pipes_it_was_given() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let (requests, mut to_serve) = std::io::pipe().unwrap();
    let (from_serve, responses) = std::io::pipe().unwrap();
    // Same open file descriptions as serve's stdin and stdout.
    let (stdin_seen, stdout_seen) = (
        requests.try_clone().unwrap(),
        responses.try_clone().unwrap(),
    );
    let nonblocking = |fd: &dyn std::os::fd::AsFd| {
        rustix::fs::fcntl_getfl(fd.as_fd())
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK)
    };
    assert!(!nonblocking(&stdin_seen) && !nonblocking(&stdout_seen));
    let mut child = w.spawn_serve(requests, responses);
    write_list(&mut to_serve, 1);
    let r = read_reply(&mut std::io::BufReader::new(from_serve), &mut String::new());
    assert_eq!(r["result"]["details"]["count"], 0, "{r}");
    assert!(
        nonblocking(&stdin_seen) && nonblocking(&stdout_seen),
        "while it runs, serve polls stdin and writes stdout without blocking"
    );
    drop(to_serve);
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&stdin_seen), "stdin's flags put back");
    assert!(!nonblocking(&stdout_seen), "stdout's flags put back");
}

/// One socket as both stdin and stdout (one open file description): serve leaves it blocking,
/// so its blocking stdout writes never meet `WouldBlock`, and answers as usual.
#[test]
fn serve_answers_over_one_socket_for_stdin_and_stdout() {
    use std::os::fd::OwnedFd;
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    // The same open file description as serve's stdin and stdout.
    let seen = theirs.try_clone().unwrap();
    let stdin = OwnedFd::from(theirs.try_clone().unwrap());
    let stdout = OwnedFd::from(theirs);
    let mut child = w.spawn_serve(stdin, stdout);
    let mut writer = ours.try_clone().unwrap();
    let mut reader = std::io::BufReader::new(ours);
    let mut line = String::new();
    for id in 1..=3 {
        write_list(&mut writer, id);
        let r = read_reply(&mut reader, &mut line);
        assert_eq!(r["id"], id, "{r}");
        assert_eq!(r["result"]["details"]["count"], 0, "{r}");
    }
    assert!(
        !rustix::fs::fcntl_getfl(&seen)
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK),
        "a socket that is both stdin and stdout stays blocking"
    );
    writer.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
}

/// serve widens its stdout pipe (to 1 MiB where the system allows it) and writes a reply of up
/// to that size from the request's task; replies asked for faster than the client reads
/// fill the pipe, and a reply that finds too little room is finished by the writer thread
/// before any later one is started: every line whole.
#[test]
fn direct_replies_that_fill_the_pipe_stay_whole() {
    const N: u64 = 250;
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let piped = std::process::Stdio::piped;
    let mut child = w.spawn_serve(piped(), piped());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = std::io::BufReader::new(stdout);
    let mut line = String::new();
    write_list(&mut stdin, 0);
    read_reply(&mut reader, &mut line);
    let pipe = rustix::pipe::fcntl_getpipe_size(reader.get_ref()).unwrap();
    let max: usize = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pipe, max.min(1 << 20), "serve widens its stdout pipe");
    seed_closed_threads(&w.base.db, N);
    // Six lists in a row, none read yet: together well past the pipe's size.
    for id in 1..=6 {
        write_list(&mut stdin, id);
    }
    let answers: Vec<Value> = (1..=6)
        .map(|_| read_reply(&mut reader, &mut line))
        .collect();
    // Requests run concurrently, so their answers come in any order, each on a line of its own.
    let mut ids: Vec<u64> = answers.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    assert!(
        line.len() > 16 * 1024 && line.len() < pipe && 5 * line.len() > pipe,
        "{} byte replies are written directly, and five of them do not fit a {pipe} byte pipe",
        line.len()
    );
    for r in &answers {
        assert_eq!(details(&r["result"])["count"].as_u64(), Some(N));
        assert_eq!(r["result"], answers[0]["result"]);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
