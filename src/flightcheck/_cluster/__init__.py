"""Gathering node snapshots for ``flightcheck cluster``: a directory of snapshots, or one
Ray task per node that collects and evaluates there."""
