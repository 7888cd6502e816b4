use std::process::ExitCode;

fn main() -> ExitCode {
    threadbase::cli::main()
}
