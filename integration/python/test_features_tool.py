"""`gregor features` prints what kafka-features.sh prints: describe from ApiVersions, and each
feature's outcome of an UpdateFeatures, decided by the controller as Kafka 4.1's."""

import subprocess

from conftest import gregor_bin, wait_for


def features(node, *args):
    return subprocess.run([str(gregor_bin()), "features", "--bootstrap-server", node.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def described(node, metadata_version):
    """The describe lines once metadata.version shows `metadata_version`, epoch stripped."""

    def lines():
        done = features(node, "describe")
        assert done.returncode == 0, done.stderr
        shown = [line.rsplit("\tEpoch: ", 1)[0] for line in done.stdout.splitlines()]
        return shown if f"FinalizedVersionLevel: {metadata_version}" in shown[-1] else None

    return wait_for(f"metadata.version {metadata_version}", lines, timeout=30)


def test_features_are_described_and_changed_as_kafka_allows(start_node):
    node = start_node()
    assert described(node, "4.0-IV3") == [
        "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1",
        "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.0-IV3"
        "\tFinalizedVersionLevel: 4.0-IV3",
    ]
    epoch = int(features(node, "describe").stdout.splitlines()[0].rsplit("\tEpoch: ", 1)[1])

    # No metadata change between 4.0-IV2 and 4.0-IV3: a safe downgrade.
    done = features(node, "downgrade", "--metadata", "4.0-IV2")
    assert (done.returncode, done.stdout) == (0, " `metadata` flag is deprecated and may be removed in a "
                                                 "future release.\nmetadata.version was downgraded to 24.\n")
    assert described(node, "4.0-IV2")[1].endswith("FinalizedVersionLevel: 4.0-IV2")
    later = int(features(node, "describe").stdout.splitlines()[0].rsplit("\tEpoch: ", 1)[1])
    assert later > epoch

    # 4.0-IV1 changed the metadata: refused, nothing written.
    done = features(node, "downgrade", "--feature", "metadata.version=22")
    assert done.returncode == 1
    assert done.stdout == (
        "Could not downgrade metadata.version to 22. The update failed for all features since the "
        "following feature had an error: Unsupported metadata.version downgrade from 24 to 22. Refusing "
        "to perform the requested downgrade because it might delete metadata information.\n")
    assert done.stderr.endswith("1 out of 1 operation(s) failed.\n")

    done = features(node, "upgrade", "--feature", "metadata.version=25", "--dry-run")
    assert (done.returncode, done.stdout) == (0, "metadata.version can be upgraded to 25.\n")
    assert described(node, "4.0-IV2")[1].endswith("4.0-IV2")
    done = features(node, "upgrade", "--feature", "metadata.version = 25")
    assert (done.returncode, done.stdout) == (0, "metadata.version was upgraded to 25.\n")
    described(node, "4.0-IV3")

    # Beyond what the controller supports, and a feature Kafka does not know.
    done = features(node, "upgrade", "--feature", "metadata.version=26")
    assert done.returncode == 1
    assert done.stdout.endswith("Invalid update version 26 for feature metadata.version. Local controller 1 "
                                "only supports versions 7-25\n"), done.stdout
    done = features(node, "disable", "--feature", "foo")
    assert done.stdout == ("Could not disable foo. The update failed for all features since the following "
                           "feature had an error: Invalid update version 0 for feature foo. Feature foo not "
                           "found.\n")
    # A feature Kafka knows and this cluster has not enabled: disabling it is allowed.
    done = features(node, "disable", "--feature", "group.version")
    assert (done.returncode, done.stdout) == (0, "group.version was disabled.\n")

    # The tool's own refusals, and the admin client's, before anything is sent.
    done = features(node, "upgrade", "--feature", "kraft.version=0")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip().endswith("The upgradeType flag should be set to SAFE_DOWNGRADE or "
                                        "UNSAFE_DOWNGRADE when the provided maxVersionLevel:0 is < 1.")
    done = features(node, "downgrade", "--feature", "kraft.version=-3")
    assert done.stderr.strip().endswith("Cannot specify a negative version level.")
    done = features(node, "disable", "--feature", " ")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip().endswith("Provided feature can not be empty.")
    done = features(node, "upgrade")
    assert (done.returncode, done.stderr.strip().endswith("You must specify at least one feature to upgrade")) \
        == (1, True), done.stderr
    done = features(node, "upgrade", "--feature", "metadata.version")
    assert "Can't parse feature=level string metadata.version: equals sign not found." in done.stderr
    done = features(node, "upgrade", "--metadata", "3.3-IV0")
    assert "Unknown metadata.version 3.3-IV0. Supported metadata.version are 3.3-IV3, 3.4-IV0" in done.stderr
