//! A node turns transparent huge pages off for its process (mimalloc would otherwise have each
//! fresh allocation fault in and zero a 2 MiB page), unless the operator chose with
//! `MIMALLOC_ALLOW_THP`.

use gregor_integration::node::GregorNode;

/// The `THP_enabled` line of a process's `/proc/<pid>/status`: false once `PR_SET_THP_DISABLE`
/// is set for it (or inherited).
fn huge_pages_enabled(pid: &str) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled line in /proc/{pid}/status:\n{status}"));
    match value.trim() {
        "0" => false,
        "1" => true,
        other => panic!("THP_enabled is {other:?}"),
    }
}

#[test]
fn a_node_runs_without_transparent_huge_pages() {
    let node = GregorNode::start(&[]).unwrap();
    let pid = node.pid().unwrap().to_string();
    assert!(
        !huge_pages_enabled(&pid),
        "the node's process still has transparent huge pages"
    );
}

#[test]
fn mimallocs_own_setting_leaves_the_choice_to_the_operator() {
    let node = GregorNode::start_with_env(&[], None, &[("MIMALLOC_ALLOW_THP", "1")]).unwrap();
    let pid = node.pid().unwrap().to_string();
    // The node leaves the process as it was started: as this test's own process, whose
    // setting it inherited.
    assert_eq!(
        huge_pages_enabled(&pid),
        huge_pages_enabled("self"),
        "the node changed its huge-page setting although MIMALLOC_ALLOW_THP was set"
    );
}
