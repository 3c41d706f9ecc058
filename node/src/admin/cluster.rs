//! `gregor cluster`: kafka-cluster.sh (`cluster-id`, `unregister`).
//!
//! Through `--bootstrap-server` the broker forwards UnregisterBroker to the active controller;
//! through `--bootstrap-controller` the tool asks DescribeCluster (KIP-919) which controller is
//! active and sends it there, as Kafka's admin client does.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args, Subcommand};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, UnregisterBrokerRequest};

use super::{block_on, check, java_message, to_active_controller, AdminClient, AdminError};

/// How long NOT_CONTROLLER answers are retried (a leader election in progress).
const RETRY_FOR: Duration = Duration::from_secs(15);

/// `gregor cluster`.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// Where to connect (one of the two is required), as each kafka-cluster.sh subcommand takes.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("bootstrap").required(true).args(["bootstrap_server", "bootstrap_controller"])))]
pub struct Connection {
    /// A list of host/port pairs to use for establishing the connection to the Kafka cluster.
    #[arg(long, short = 'b', value_name = "HOST:PORT")]
    pub bootstrap_server: Option<String>,
    /// A list of host/port pairs to use for establishing the connection to the KRaft
    /// controllers.
    #[arg(long, short = 'C', value_name = "HOST:PORT")]
    pub bootstrap_controller: Option<String>,
    /// A property file containing configurations for the Admin client.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Get information about the ID of a cluster.
    ClusterId {
        /// Where to connect.
        #[command(flatten)]
        connection: Connection,
    },
    /// Unregister a broker.
    Unregister {
        /// Where to connect.
        #[command(flatten)]
        connection: Connection,
        /// The ID of the broker to unregister.
        #[arg(long, short = 'i', allow_negative_numbers = true)]
        id: i32,
    },
}

/// Runs `gregor cluster`; `Err` is the message for stderr (exit 1).
pub fn run_cluster(args: ClusterArgs) -> Result<(), String> {
    block_on(run(args))?
}

async fn run(args: ClusterArgs) -> Result<(), String> {
    match args.command {
        ClusterCommand::ClusterId { connection } => {
            let mut client = connect(&connection).await?;
            let (_, cluster) = client
                .send(&DescribeClusterRequest::default())
                .await
                .map_err(|e| e.to_string())?;
            check(cluster.error_code, cluster.error_message.as_ref()).map_err(|e| e.to_string())?;
            outln!("Cluster ID: {}", cluster.cluster_id);
            Ok(())
        }
        ClusterCommand::Unregister { connection, id } => {
            let mut client = connect_active(&connection).await?;
            match unregister(&mut client, id).await {
                Ok(()) => {
                    outln!("Broker {id} is no longer registered.");
                    Ok(())
                }
                Err(AdminError::UnsupportedVersion(_)) => {
                    outln!("The target cluster does not support the broker unregistration API.");
                    Ok(())
                }
                Err(AdminError::Broker { code, .. })
                    if code == ResponseError::UnsupportedVersion.code() =>
                {
                    outln!("The target cluster does not support the broker unregistration API.");
                    Ok(())
                }
                Err(AdminError::Broker { code, message }) => {
                    Err(exception_text(code, message.as_deref()))
                }
                Err(error) => Err(error.to_string()),
            }
        }
    }
}

/// What kafka-cluster.sh prints for a failed call: the `ExecutionException` message, which is
/// the cause's class name and message.
fn exception_text(code: i16, message: Option<&str>) -> String {
    let class = match ResponseError::try_from_code(code) {
        Some(ResponseError::BrokerIdNotRegistered) => "BrokerIdNotRegisteredException",
        Some(ResponseError::NotController) => "NotControllerException",
        Some(ResponseError::ClusterAuthorizationFailed) => "ClusterAuthorizationException",
        _ => "KafkaException",
    };
    format!(
        "org.apache.kafka.common.errors.{class}: {}",
        java_message(code, message)
    )
}

/// Sends UnregisterBroker, retrying NOT_CONTROLLER while a controller is elected.
async fn unregister(client: &mut AdminClient, id: i32) -> Result<(), AdminError> {
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let (_, response) = client
            .send(&UnregisterBrokerRequest::default().with_broker_id(BrokerId(id)))
            .await?;
        if response.error_code == ResponseError::NotController.code() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        return check(response.error_code, response.error_message.as_ref());
    }
}

fn bootstrap(connection: &Connection) -> Result<String, String> {
    if let Some(file) = &connection.config {
        if !file.exists() {
            return Err(format!(
                "Properties file {} does not exists!",
                file.display()
            ));
        }
    }
    connection
        .bootstrap_server
        .clone()
        .or_else(|| connection.bootstrap_controller.clone())
        .ok_or_else(|| "one of --bootstrap-server or --bootstrap-controller is required".into())
}

async fn connect(connection: &Connection) -> Result<AdminClient, String> {
    AdminClient::connect(&bootstrap(connection)?)
        .await
        .map_err(|e| e.to_string())
}

/// Connects to the bootstrap address; with `--bootstrap-controller`, then to the active
/// controller named by DescribeCluster.
async fn connect_active(connection: &Connection) -> Result<AdminClient, String> {
    let client = connect(connection).await?;
    if connection.bootstrap_controller.is_none() {
        return Ok(client);
    }
    to_active_controller(client, &super::CommandConfig::default()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_as_kafka_cluster_prints_them() {
        assert_eq!(
            exception_text(102, None),
            "org.apache.kafka.common.errors.BrokerIdNotRegisteredException: The given broker ID was not registered."
        );
    }
}
