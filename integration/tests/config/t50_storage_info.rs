//! `gregor storage info -c server.properties` as `kafka-storage.sh info`, and `gregor completions`.

use std::process::{Command, Output};

use gregor_integration::binary_path;

fn gregor(args: &[&str]) -> Output {
    Command::new(binary_path())
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn storage_info_reports_formatted_and_missing_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let config = tmp.path().join("server.properties");
    std::fs::write(
        &config,
        format!(
            "node.id=3\nlog.dirs={}\nlisteners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n",
            data.display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let before = gregor(&["storage", "info", "-c", config]);
    assert_eq!(before.status.code(), Some(1), "{before:?}");
    assert_eq!(
        text(&before.stdout),
        format!("Found problem:\n  {} does not exist\n\n", data.display())
    );

    let uuid = gregor(&["storage", "random-uuid"]);
    let cluster_id = text(&uuid.stdout).trim().to_owned();
    let cluster_id = cluster_id.as_str();
    let format = gregor(&[
        "storage",
        "format",
        "-c",
        config,
        "-t",
        cluster_id,
        "--standalone",
    ]);
    assert!(format.status.success(), "{format:?}");

    let after = gregor(&["storage", "info", "-c", config]);
    assert!(after.status.success(), "{after:?}");
    let report = text(&after.stdout);
    let expected_start = format!(
        "Found log directory:\n  {}\n\nFound metadata: {{cluster.id={cluster_id}, directory.id=",
        data.display()
    );
    assert!(report.starts_with(&expected_start), "{report}");
    assert!(report.ends_with(", node.id=3, version=1}\n\n"), "{report}");
}

#[test]
fn completions_are_generated_by_clap() {
    let bash = gregor(&["completions", "bash"]);
    assert!(bash.status.success(), "{bash:?}");
    let script = text(&bash.stdout);
    assert!(script.contains("complete -F _gregor"), "{script}");
    assert!(
        script.contains("metadata-quorum"),
        "every subcommand is completed"
    );
    let unknown = gregor(&["completions", "tcsh"]);
    assert_eq!(unknown.status.code(), Some(1), "a usage error");
}
