"""L2: `sim.next` look-ahead closed forms (sim), noisy-channel EIG and the Bayes-D rule (eig)."""
