"""Fixture (ours): the hosts of a lab cluster, kept beside the trainer."""
ps_nodes = ["10.0.0.10:2222"]
worker_nodes = ["10.0.0.11:2222", "10.0.0.12:2222", "10.0.0.13:2222"]
