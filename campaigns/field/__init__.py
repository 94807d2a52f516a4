"""Field sync: what tablets record (services) and what they and managers read (selectors).

Every action on a tablet is a :class:`~campaigns.models.FieldRecord` with a UUID the tablet
generated; :func:`~campaigns.field.services.field_record_submit` stores it exactly once per
organization and answers every replay with the first answer. See ``services`` for the
conflict and staleness rules and ``selectors`` for the sync payload and round progress.
"""
