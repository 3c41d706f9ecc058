//! The controller validates each request against a working image that includes writes still in
//! flight: racing mutations from many connections must see each other.

use gregor_integration::admin::{
    creatable, create_topics, delete_topics_by_name, metadata, topics_of,
};
use gregor_integration::GregorNode;
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest};

use crate::connect;

const RACERS: usize = 16;

#[tokio::test]
async fn racing_creates_of_one_name_succeed_once() {
    let node = GregorNode::start(&[]).unwrap();
    let mut racers = Vec::new();
    for _ in 0..RACERS {
        let mut conn = connect(&node).await;
        racers.push(tokio::spawn(async move {
            let request = create_topics(vec![creatable("contended", 3, 1)], false);
            let response = conn.send::<CreateTopicsRequest>(&request, 7).await.unwrap();
            response.topics[0].error_code
        }));
    }
    let mut codes = Vec::new();
    for racer in racers {
        codes.push(racer.await.unwrap());
    }
    codes.sort_unstable();
    let mut expected = vec![36; RACERS - 1];
    expected.insert(0, 0);
    assert_eq!(codes, expected, "one NONE, the rest TOPIC_ALREADY_EXISTS");

    // Racing deletes of the same topic: one succeeds, the rest find it gone.
    let mut racers = Vec::new();
    for _ in 0..RACERS {
        let mut conn = connect(&node).await;
        racers.push(tokio::spawn(async move {
            let request = delete_topics_by_name(6, &["contended"]);
            let response = conn.send::<DeleteTopicsRequest>(&request, 6).await.unwrap();
            response.responses[0].error_code
        }));
    }
    let mut codes = Vec::new();
    for racer in racers {
        codes.push(racer.await.unwrap());
    }
    codes.sort_unstable();
    let mut expected = vec![3; RACERS - 1];
    expected.insert(0, 0);
    assert_eq!(
        codes, expected,
        "one NONE, the rest UNKNOWN_TOPIC_OR_PARTITION"
    );

    let mut conn = connect(&node).await;
    let response = conn
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap();
    assert!(topics_of(&response).is_empty());
}
