-- Publication and withdrawal read a release's shape (trajpub/candidate.py: Shape) from its summary, where the
-- staging step records it since the one release contract. Releases staged before recorded only their product:
-- each mechanism releases one shape (its declaration in tasks/adapters), so the shape follows from the mechanism.
UPDATE governance.releases
   SET summary = summary || jsonb_build_object('shape', CASE mechanism
       WHEN 'fastpub' THEN 'fragments'
       WHEN 'glove' THEN 'generalised'
       WHEN 'klt' THEN 'generalised'
       WHEN 'dummy' THEN 'anonymity_sets'
       WHEN 'kpsi_anonymity' THEN 'anonymity_sets'
       WHEN 'w4m' THEN 'anonymity_sets'
       WHEN 'fgs_pufferfish' THEN 'truthful'
       WHEN 'mixzone' THEN 'truthful'
       ELSE 'synthetic' END)
 WHERE summary ? 'product' AND NOT summary ? 'shape';
