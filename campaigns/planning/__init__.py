"""Django-free planning cores, fed plain numbers.

``allocation`` (episodes per cell and site, with an upper bound), ``scheduling`` (day-visits
in site windows for field teams, with ``validate_schedule``) and ``protocol`` (the field
steps of a collection task). Nothing here imports Django or analytics.
"""
