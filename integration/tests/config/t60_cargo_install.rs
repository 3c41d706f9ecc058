//! `cargo install --path node` installs a `gregor` that starts a node and answers a client.
//!
//! Ignored by default: it installs through the tests' own target directory (anything else is a
//! full rebuild), and cargo replaces `target/debug/gregor` while doing so, which would race with
//! the tests running in parallel that start that binary. Run it alone:
//! `cargo test -p gregor-integration --test config -- --ignored cargo_install`.

use std::path::Path;
use std::process::Command;

use gregor_integration::node::parse_ready_line;
use gregor_integration::{binary_path, KafkaConn};
use kafka_protocol::messages::ApiVersionsRequest;

use crate::t40_json_logs::start_until_ready;

#[tokio::test]
#[ignore = "replaces target/debug/gregor under tests running in parallel; run it alone"]
async fn cargo_install_gives_a_working_gregor() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // The tests' own target directory: the dependencies are built already, so the install
    // only links (a debug build, like the binary the other tests run).
    let target = binary_path()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let root = tempfile::tempdir().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let install = Command::new(cargo)
        .args(["install", "--debug", "--offline", "--locked", "--path"])
        .arg(workspace.join("node"))
        .arg("--root")
        .arg(root.path())
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "cargo install failed\n{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let installed = root.path().join("bin").join("gregor");
    assert!(installed.is_file(), "{} missing", installed.display());

    let data = tempfile::tempdir().unwrap();
    let (mut child, lines) = start_until_ready(&installed, data.path(), &[], &[]);
    let ready = parse_ready_line(lines.last().unwrap()).unwrap();
    let mut conn = KafkaConn::connect(&ready.plaintext).await.unwrap();
    let versions = conn
        .send::<ApiVersionsRequest>(&ApiVersionsRequest::default(), 0)
        .await
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(versions.error_code, 0);
    assert!(!versions.api_keys.is_empty());
}
