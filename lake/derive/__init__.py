"""The lake's derived columns: what is computed from a stored screenshot rather than recorded.

``images`` checks screenshots on the way in (and gives the perceptual hash when it decodes),
``anchor`` builds anchor keys from UI trees and perceptual hashes, ``embedding`` makes a
screen's vector, and ``derivations`` is the registry of derived columns and the `fill` every
enrichment shares (``elake enrich``, the trainer's own batch, background enrichers).

The recorder, the trainer and the API server all finish rows through here, so none of them
imports the collectors' recording room to do it."""
