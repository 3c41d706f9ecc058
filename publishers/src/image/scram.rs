//! SCRAM credentials: [`ScramImage`] and [`ScramDelta`], Kafka's `ScramImage`. Brokers
//! authenticate SCRAM clients against it, so a credential altered on the controller applies on
//! every node as soon as its record is applied.

use std::sync::Arc;

use crate::delta::ReplayError;
use crate::records::{MetadataRecord, RemoveUserScramCredentialRecord, UserScramCredentialRecord};
use crate::scram::{ScramCredential, ScramMechanism};

/// Every user's SCRAM credentials, by (user, mechanism).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScramImage {
    credentials: imbl::OrdMap<(String, ScramMechanism), ScramCredential>,
}

impl ScramImage {
    /// Whether no credential exists.
    pub fn is_empty(&self) -> bool {
        self.credentials.is_empty()
    }

    /// The credential of `user` for `mechanism`.
    pub fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.credentials.get(&(user.to_owned(), mechanism))
    }

    /// Every (user, mechanism, credential), by user then mechanism.
    pub fn iter(&self) -> impl Iterator<Item = (&str, ScramMechanism, &ScramCredential)> {
        self.credentials
            .iter()
            .map(|((user, mechanism), credential)| (user.as_str(), *mechanism, credential))
    }

    /// The (mechanism, credential) pairs of `user`.
    pub fn of_user<'a>(
        &'a self,
        user: &'a str,
    ) -> impl Iterator<Item = (ScramMechanism, &'a ScramCredential)> + 'a {
        ScramMechanism::ALL
            .into_iter()
            .filter_map(move |mechanism| Some((mechanism, self.credential(user, mechanism)?)))
    }

    /// The image as records, one `UserScramCredentialRecord` per credential.
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        out.extend(self.iter().map(|(user, mechanism, credential)| {
            MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                name: user.to_owned(),
                mechanism: mechanism.type_code(),
                salt: credential.salt.clone(),
                stored_key: credential.stored_key.clone(),
                server_key: credential.server_key.clone(),
                iterations: credential.iterations,
            })
        }));
    }
}

/// SCRAM credential changes of one delta: the next image, built by persistent-map updates.
#[derive(Clone, Debug)]
pub struct ScramDelta {
    next: ScramImage,
}

fn mechanism(code: i8) -> Result<ScramMechanism, ReplayError> {
    ScramMechanism::from_type(code).ok_or(ReplayError::UnknownScramMechanism { mechanism: code })
}

impl ScramDelta {
    /// An empty delta on `base` (an O(1) copy of its map).
    pub fn new(base: &Arc<ScramImage>) -> Self {
        ScramDelta {
            next: ScramImage::clone(base),
        }
    }

    /// Sets a credential.
    pub fn replay_upsert(&mut self, record: &UserScramCredentialRecord) -> Result<(), ReplayError> {
        let mechanism = mechanism(record.mechanism)?;
        self.next.credentials.insert(
            (record.name.clone(), mechanism),
            ScramCredential {
                salt: record.salt.clone(),
                stored_key: record.stored_key.clone(),
                server_key: record.server_key.clone(),
                iterations: record.iterations,
            },
        );
        Ok(())
    }

    /// Removes a credential (removing a missing one changes nothing).
    pub fn replay_remove(
        &mut self,
        record: &RemoveUserScramCredentialRecord,
    ) -> Result<(), ReplayError> {
        let mechanism = mechanism(record.mechanism)?;
        self.next
            .credentials
            .remove(&(record.name.clone(), mechanism));
        Ok(())
    }

    /// The next image.
    pub fn apply(&self) -> ScramImage {
        self.next.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> UserScramCredentialRecord {
        UserScramCredentialRecord {
            name: name.into(),
            mechanism,
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations,
        }
    }

    #[test]
    fn credentials_are_set_replaced_and_removed() -> Result<(), ReplayError> {
        let base = Arc::new(ScramImage::default());
        let mut delta = ScramDelta::new(&base);
        delta.replay_upsert(&upsert("alice", 1, 4096))?;
        delta.replay_upsert(&upsert("alice", 2, 8192))?;
        delta.replay_upsert(&upsert("alice", 1, 5000))?;
        delta.replay_upsert(&upsert("bob", 2, 4096))?;
        let image = Arc::new(delta.apply());
        let iterations: Vec<(&str, ScramMechanism, i32)> = image
            .iter()
            .map(|(user, mechanism, c)| (user, mechanism, c.iterations))
            .collect();
        assert_eq!(
            iterations,
            vec![
                ("alice", ScramMechanism::Sha256, 5000),
                ("alice", ScramMechanism::Sha512, 8192),
                ("bob", ScramMechanism::Sha512, 4096),
            ]
        );
        let mut delta = ScramDelta::new(&image);
        delta.replay_remove(&RemoveUserScramCredentialRecord {
            name: "alice".into(),
            mechanism: 1,
        })?;
        let next = delta.apply();
        assert!(next.credential("alice", ScramMechanism::Sha256).is_none());
        assert_eq!(next.of_user("alice").count(), 1);
        assert_eq!(image.of_user("alice").count(), 2, "the base is unchanged");
        let mut records = Vec::new();
        next.to_records(&mut records);
        assert_eq!(records.len(), 2);
        assert!(matches!(
            ScramDelta::new(&image).replay_upsert(&upsert("carol", 3, 4096)),
            Err(ReplayError::UnknownScramMechanism { mechanism: 3 })
        ));
        Ok(())
    }
}
