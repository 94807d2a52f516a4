from django.apps import AppConfig


class SitesConfig(AppConfig):
    name = "sites"
    label = "sites"
    verbose_name = "World model: sites, embodiments, deployments, taxonomies"
