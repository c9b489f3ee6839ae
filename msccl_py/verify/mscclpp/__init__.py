"""The MSCCL++ plan verifier: every size regime run on the plan machine, races, limits."""
