"""The runtime side: the local-cluster launcher, the reference programs and `tfmigrate check`
(its harness, topology and the TF1 compatibility it gives legacy scripts)."""
