//! Every (API, version) pair advertised by a broker-only node (which forwards the controller
//! APIs to the active controller and relays its answer) and by a controller-only node answers
//! at that version.

use crate::advertised::check_every_advertised_version;
use crate::Cluster;

#[tokio::test]
async fn every_advertised_version_answers_through_a_forwarding_broker() {
    let cluster = Cluster::start(1, 1).unwrap();
    let broker = &cluster.brokers[0].1;
    let controller = &cluster.controllers[0].1;
    let mut failures = check_every_advertised_version(&broker.bootstrap()).await;
    failures.extend(
        check_every_advertised_version(&controller.addrs().controller.clone().unwrap()).await,
    );
    assert!(
        failures.is_empty(),
        "{} failure(s):\n  {}\n--- broker stderr ---\n{}\n--- controller stderr ---\n{}",
        failures.len(),
        failures.join("\n  "),
        broker.stderr(),
        controller.stderr()
    );
}
