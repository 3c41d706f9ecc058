//! Every (API, version) pair ApiVersions advertises, on each listener kind, answers a valid
//! request of that version with a response of that version: same correlation id, the header
//! version Kafka uses, and a body that decodes strictly (no byte left over).

use gregor_integration::GregorNode;

use crate::advertised::check_every_advertised_version;
use crate::Failures;

#[tokio::test]
async fn every_advertised_version_answers_on_every_listener() {
    // Metadata before v4 always asks for auto-creation: keep the probe topic absent.
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut f = Failures::default();
    for addr in [
        node.addrs().plaintext.clone(),
        node.addrs().controller.clone().unwrap(),
    ] {
        for failure in check_every_advertised_version(&addr).await {
            f.push(failure);
        }
    }
    f.assert_none(&node);
}
