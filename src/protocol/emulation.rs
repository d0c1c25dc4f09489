//! Version emulation (`sluice.emulate.kafka.version=3.6`): sluice's `VersionTable` narrowed to
//! what a broker of one Kafka release advertised (`kafka_releases`, generated from that
//! release's schemas), so clients are tested against the versions their production brokers
//! offer. This is the one place the narrowing is decided; the result is an ordinary
//! `VersionTable`, which ApiVersions advertises and the request path enforces like sluice's own.
//!
//! An API is kept only if the release advertised it, with the intersection of the two ranges:
//! its maximum the smaller maximum, its served and advertised minimums each raised to the
//! release's minimum. So a request at a version the release lacks meets what any unadvertised
//! version meets (`codec`): the v0 UNSUPPORTED_VERSION answer for ApiVersions, a closed
//! connection for every other API, as Kafka does. Features follow the release too
//! (`supported_feature`, `finalized_feature`): a feature the release did not have is not
//! advertised, and levels are kept within the release's range.

use std::fmt;

use super::kafka_releases::{ApiRow, Range, API_ROWS, FEATURE_ROWS, PATCHES, RELEASES};
use super::versions::{ApiSupport, VersionTable};

/// A `sluice.emulate.kafka.version` that names no release in `kafka_releases`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownRelease {
    pub requested: String,
}

impl fmt::Display for UnknownRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sluice.emulate.kafka.version={}: not a Kafka release sluice can emulate; the releases \
             it knows are {}",
            self.requested,
            RELEASES.join(", ")
        )
    }
}

impl std::error::Error for UnknownRelease {}

impl VersionTable {
    /// The table for the setting `sluice.emulate.kafka.version`: sluice's own when unset.
    pub fn for_setting(release: Option<&str>) -> Result<VersionTable, UnknownRelease> {
        match release {
            None => Ok(VersionTable::sluice()),
            Some(release) => VersionTable::emulating(release),
        }
    }

    /// sluice's table narrowed to what a broker of `release` (`MAJOR.MINOR`; a patch number
    /// is ignored) advertised.
    pub fn emulating(release: &str) -> Result<VersionTable, UnknownRelease> {
        let major_minor: Vec<&str> = release.trim().splitn(3, '.').take(2).collect();
        let column = RELEASES
            .iter()
            .position(|known| *known == major_minor.join("."))
            .ok_or_else(|| UnknownRelease {
                requested: release.to_string(),
            })?;
        let apis = VersionTable::sluice()
            .apis
            .iter()
            .filter_map(|api| narrow(api, release_range(api.key as i16, column)?))
            .collect();
        Ok(VersionTable {
            apis,
            release: Some(column),
        })
    }

    /// The emulated release (`"3.6"`), or None for sluice's own table.
    pub fn emulated_release(&self) -> Option<&'static str> {
        self.release.map(|column| RELEASES[column])
    }

    /// The patch release whose schemas the emulated release's ranges were read from
    /// (`"3.6.2"`), or None for sluice's own table.
    pub fn emulated_patch(&self) -> Option<&'static str> {
        self.release.map(|column| PATCHES[column])
    }

    /// A feature's supported range `min..=max` as this table advertises it: unchanged without
    /// emulation; else None when the emulated release's broker did not support the feature, or
    /// the intersection with the range it supported.
    pub fn supported_feature(&self, name: &str, min: i16, max: i16) -> Option<(i16, i16)> {
        let Some(column) = self.release else {
            return Some((min, max));
        };
        let (release_min, release_max) = feature_range(name, column)?;
        let (min, max) = (min.max(release_min), max.min(release_max));
        (min <= max).then_some((min, max))
    }

    /// A finalized feature level as this table advertises it: unchanged without emulation;
    /// else None when the emulated release did not have the feature, or the level kept within
    /// the release's supported range (a release finalizes at most its own latest level).
    pub fn finalized_feature(&self, name: &str, level: i16) -> Option<i16> {
        let Some(column) = self.release else {
            return Some(level);
        };
        let (release_min, release_max) = feature_range(name, column)?;
        Some(level.clamp(release_min, release_max))
    }
}

/// The intersection of sluice's support for an API with a release's advertised range, or None
/// when nothing is left that sluice serves.
fn narrow(api: &ApiSupport, (release_min, release_max): (i16, i16)) -> Option<ApiSupport> {
    let narrowed = ApiSupport {
        key: api.key,
        advertised_min: api.advertised_min.max(release_min),
        served_min: api.served_min.max(release_min),
        max: api.max.min(release_max),
    };
    (narrowed.served_min <= narrowed.max).then_some(narrowed)
}

/// What the emulated `release` advertised for an API, for the log line of a refused request:
/// "Kafka 3.6 advertised Produce 0-9" or "Kafka 3.6 did not advertise DescribeTopicPartitions".
pub(super) fn release_note(api_key: i16, release: &str) -> String {
    let row = API_ROWS.iter().find(|row| row.key == api_key);
    let name = row.map_or("this API", |row| row.name);
    let range = RELEASES
        .iter()
        .position(|known| *known == release)
        .and_then(|column| row?.ranges[column]);
    match range {
        Some((min, max)) => {
            format!("emulating Kafka {release}, which advertised {name} {min}-{max}")
        }
        None => format!("emulating Kafka {release}, which did not advertise {name}"),
    }
}

fn release_range(api_key: i16, column: usize) -> Range {
    API_ROWS
        .iter()
        .find(|row: &&ApiRow| row.key == api_key)
        .and_then(|row| row.ranges[column])
}

fn feature_range(name: &str, column: usize) -> Range {
    FEATURE_ROWS
        .iter()
        .find(|row| row.name == name)
        .and_then(|row| row.ranges[column])
}

#[cfg(test)]
mod tests {
    use super::super::versions::SUPPORTED_APIS;
    use super::*;
    use kafka_protocol::messages::ApiKey;

    fn range(table: &VersionTable, key: ApiKey) -> Option<(i16, i16, i16)> {
        let served = table.served_range(key as i16)?;
        let advertised = table.advertised_range(key as i16)?;
        Some((advertised.0, served.0, served.1))
    }

    #[test]
    fn emulated_3_6_has_its_ranges() {
        let table = VersionTable::emulating("3.6").unwrap();
        assert_eq!(table.emulated_release(), Some("3.6"));
        // Advertised from 0 as 3.6 did; served from v3 (sluice has no v0-2).
        assert_eq!(range(&table, ApiKey::Produce), Some((0, 3, 9)));
        assert_eq!(range(&table, ApiKey::Fetch), Some((4, 4, 15)));
        assert_eq!(range(&table, ApiKey::ApiVersions), Some((0, 0, 3)));
        // OffsetCommit v9 was unstable in 3.6, so not advertised.
        assert_eq!(range(&table, ApiKey::OffsetCommit), Some((2, 2, 8)));
        assert_eq!(range(&table, ApiKey::DescribeTopicPartitions), None);
        assert_eq!(
            table.served_range(ApiKey::DescribeTopicPartitions as i16),
            None
        );
    }

    #[test]
    fn a_patch_number_is_ignored_and_unknown_releases_are_refused() {
        let table = VersionTable::emulating("3.9.1").unwrap();
        assert_eq!(table.emulated_release(), Some("3.9"));
        for bad in ["2.7", "3.10", "5.0", "latest", ""] {
            let error = VersionTable::emulating(bad).unwrap_err();
            assert!(error.to_string().contains("2.8, 3.0"), "{error}");
        }
        assert!(VersionTable::for_setting(None)
            .unwrap()
            .emulated_release()
            .is_none());
    }

    #[test]
    fn every_emulated_table_is_within_sluice_and_the_release() {
        let sluice = VersionTable::sluice();
        for (column, release) in RELEASES.iter().enumerate() {
            let table = VersionTable::emulating(release).unwrap();
            assert!(!table.apis.is_empty(), "{release}");
            for api in &table.apis {
                let key = api.key as i16;
                let (own_min, own_max) = sluice.served_range(key).unwrap();
                let (release_min, release_max) = release_range(key, column).unwrap();
                assert!(
                    api.served_min >= own_min.max(release_min),
                    "{release} {key}"
                );
                assert!(api.max <= own_max.min(release_max), "{release} {key}");
                assert!(api.advertised_min >= release_min && api.advertised_min <= api.served_min);
            }
            // ApiVersions is always there, so a client can always learn what is served.
            assert!(table.served_range(ApiKey::ApiVersions as i16).is_some());
        }
    }

    #[test]
    fn sluice_advertises_nothing_kafka_4_4_does_not() {
        let column = RELEASES.iter().position(|r| *r == "4.4").unwrap();
        for api in SUPPORTED_APIS {
            let (min, max) = release_range(api.key as i16, column)
                .unwrap_or_else(|| panic!("{:?} is not in Kafka 4.4", api.key));
            assert!(api.advertised_min >= min && api.max <= max, "{:?}", api.key);
        }
    }

    #[test]
    fn the_generated_table_is_well_formed() {
        assert_eq!(RELEASES.len(), PATCHES.len());
        for (release, patch) in RELEASES.iter().zip(PATCHES) {
            assert!(patch.starts_with(&format!("{release}.")), "{patch}");
        }
        assert!(API_ROWS.windows(2).all(|w| w[0].key < w[1].key));
        for row in API_ROWS {
            assert!(row.ranges.iter().flatten().all(|(lo, hi)| lo <= hi));
        }
    }

    #[test]
    fn refusals_say_what_the_release_had() {
        assert_eq!(
            release_note(0, "3.6"),
            "emulating Kafka 3.6, which advertised Produce 0-9"
        );
        assert_eq!(
            release_note(75, "3.6"),
            "emulating Kafka 3.6, which did not advertise DescribeTopicPartitions"
        );
    }

    #[test]
    fn features_follow_the_release() {
        let own = VersionTable::sluice();
        assert_eq!(
            own.supported_feature("transaction.version", 0, 2),
            Some((0, 2))
        );
        assert_eq!(own.finalized_feature("group.version", 1), Some(1));

        let old = VersionTable::emulating("3.6").unwrap();
        assert_eq!(old.supported_feature("transaction.version", 0, 2), None);
        assert_eq!(old.finalized_feature("group.version", 1), None);
        assert_eq!(
            old.supported_feature("metadata.version", 7, 27),
            Some((7, 14))
        );
        assert_eq!(old.finalized_feature("metadata.version", 27), Some(14));

        let four = VersionTable::emulating("4.0").unwrap();
        assert_eq!(
            four.supported_feature("transaction.version", 0, 2),
            Some((0, 2))
        );
        assert_eq!(four.finalized_feature("share.version", 1), None);

        let zookeeper = VersionTable::emulating("2.8").unwrap();
        assert_eq!(zookeeper.supported_feature("metadata.version", 7, 27), None);
    }
}
